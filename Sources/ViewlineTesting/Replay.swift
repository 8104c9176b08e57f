import Foundation
import ViewlineKit

/// Plays a recorded session (a ``Transcript``) against this build's view-models and
/// stops at the first step where they do something else.
///
/// ```swift
/// @Test func theRecordedSearchStillWorks() async throws {
///     let transcript = try Transcript(contentsOf: fixtureURL("search.jsonl"))
///     try await Replay(transcript, apps: [Search.self], services: services).run()
/// }
/// ```
///
/// The commands go to a new session in their recorded order, one at a time as a
/// connection sends them; each backend call is answered with its recorded answer
/// (not called) when the playback reaches that answer; the clock gives the recorded
/// readings and each sleep ends where it ended. Every step the session takes —
/// event, reply, call with its arguments, clock reading — is compared with the
/// recorded one as it comes. Services that are not backends (a store, an
/// observation's source) are the ones `services` holds: a replay starts them as
/// the recorded server started (empty, or with the same data).
///
/// Not replayed as they were: commands from several connections go through one, in
/// order (a command that awaits holds the next back); a backend error comes back as
/// a `ProtocolError` with the recorded code and text, whatever its type was.
public struct Replay {
    /// The transcript played.
    public let transcript: Transcript
    /// How long a step may take to come before the replay says it never did
    /// (generous, as ``TestStore/timeout``: it only matters when the replay differs).
    public var timeout: Duration = .seconds(120)
    /// Values for the secrets the recording masked, by argument or alert field name
    /// (`password`), in the order the recording used them (the last one again once
    /// they are spent): a command that had one is sent with it.
    public var secrets: [String: [String]]
    /// Key paths whose values are not compared (`state.token` in any event):
    /// what is made at random.
    public var ignoring: Set<String>

    private let apps: [any ViewModel.Type]
    private let services: Services
    private let faults: FaultInjector

    /// A replay of `transcript` against `apps`, on `services` (backends included:
    /// they are checked to exist, never called).
    /// `faults` is the `fault` table a service checks itself (the one it was made
    /// with): a recorded `fault` command arms it again.
    public init(
        _ transcript: Transcript, apps: [any ViewModel.Type], services: Services = Services(), faults: FaultInjector = FaultInjector(),
        secrets: [String: [String]] = [:], ignoring: Set<String> = []
    ) {
        self.transcript = transcript
        self.apps = apps
        self.services = services
        self.faults = faults
        self.secrets = secrets
        self.ignoring = ignoring
    }

    /// Plays the transcript to its end.
    ///
    /// - Throws: ``ReplayDivergence`` at the first step that differs (or never came,
    ///   or came beyond the end), with the command that led to it and a per-key diff.
    public func run() async throws {
        let readings = transcript.steps.compactMap { step -> Double? in
            if case .clock(let seconds) = step { return seconds }
            return nil
        }
        let player = ReplayPlayer(clockReadings: readings)
        var services = self.services
        services.clock = player.clock
        services.sleep = { try await player.sleep($0) }
        var configuration = ServerConfiguration()
        // As the recorded server ran: an admin command is refused again where it was.
        configuration.admin = transcript.header["admin"]?.boolValue ?? true
        configuration.replayer = player
        let application = Application(apps, services: services, faults: faults, configuration: configuration)
        let session = Session(id: transcript.header["session"]?.stringValue ?? "s1", application: application, output: { _ in })
        let (lines, feed) = AsyncStream.makeStream(of: Request.self)
        // The replayed connection: its commands run one at a time, in order.
        let connection = Task {
            for await request in lines { _ = await session.handle(request) }
        }
        defer {
            feed.finish()
            player.finish()
            connection.cancel()
        }
        do {
            try await play(session: session, application: application, player: player, feed: feed)
        } catch {
            await session.close(.ended)
            throw error
        }
        await session.close(.ended)
    }

    private func play(
        session: Session, application: Application, player: ReplayPlayer, feed: AsyncStream<Request>.Continuation
    ) async throws {
        var lastCommand: String?
        var outputs = 0
        var secretsUsed: [String: Int] = [:]
        for (index, step) in transcript.steps.enumerated() {
            let place: ReplayPlayer.Place
            switch step {
            case .command(let request, _, let masked):
                lastCommand = Self.shown(request)
                feed.yield(
                    try self.request(
                        from: request, masked: masked, at: index, commands: application.commands, after: lastCommand, secretsUsed: &secretsUsed))
                continue
            case .answer(_, .unrecordable(let type)):
                throw divergence(
                    at: index, after: lastCommand,
                    "the recorded call answered a \(type), which is not Encodable: the recording could not keep it, and this replay cannot serve it")
            case .answer(let number, let answer):
                player.release(call: number, answer)
                // The view-model takes it at once; one that no longer decodes as what
                // it asks for stops the replay here, not at what it changes later.
                _ = await player.liveStep(.answer(number), timeout: timeout)
                if let reason = player.unreplayable(call: number) {
                    throw divergence(at: index, after: lastCommand, reason)
                }
                continue
            case .woke(let number, cancelled: false):
                player.wake(number)
                continue
            case .clock, .sleep, .woke:
                continue
            case .event, .reply:
                place = .output(outputs)
                outputs += 1
            case .call(let number, _, _):
                player.letCallThrough()
                place = .call(number)
            }
            guard let live = await player.liveStep(place, timeout: timeout) else {
                throw divergence(
                    at: index, after: lastCommand, "expected \(Self.describe(step)); the build did nothing of the kind within \(timeout)")
            }
            if let difference = difference(expected: step, actual: live) {
                throw divergence(at: index, after: lastCommand, difference)
            }
        }
        // Whatever the build sends beyond the recording is a difference too (unless
        // the recording was cut there).
        if !transcript.wasCut, let extra = await player.liveStep(.output(outputs), timeout: .milliseconds(300)) {
            throw divergence(at: transcript.count, after: lastCommand, "the recording ends here; the build went on: \(Self.describe(extra))")
        }
    }

    /// A recorded request as the command to send, the secrets it masked filled in.
    private func request(
        from recorded: JSON, masked: [String], at index: Int, commands: CommandTable, after command: String?,
        secretsUsed: inout [String: Int]
    ) throws -> Request {
        var request = recorded
        if !masked.isEmpty, case .object(var object) = recorded, case .object(var arguments)? = object["args"] {
            for path in masked {
                let parts = path.split(separator: ".", maxSplits: 1).map(String.init)
                if parts.count == 1 {
                    arguments[parts[0]] = try secret(parts[0], at: index, after: command, used: &secretsUsed)
                } else if case .object(var fields)? = arguments[parts[0]] {
                    fields[parts[1]] = try secret(parts[1], at: index, after: command, used: &secretsUsed)
                    arguments[parts[0]] = .object(fields)
                }
            }
            object["args"] = .object(arguments)
            request = .object(object)
        }
        switch RequestDecoder.decode(line: request.encoded, commands: commands) {
        case .success(let decoded)?: return decoded
        case .failure(let failure)?: throw divergence(at: index, after: command, "this build refuses the recorded command: \(failure.error.message)")
        case nil: throw divergence(at: index, after: command, "the recorded command is empty")
        }
    }

    private func secret(_ name: String, at index: Int, after command: String?, used: inout [String: Int]) throws -> JSON {
        guard let values = secrets[name], !values.isEmpty else {
            throw divergence(at: index, after: command, "the recording masked the secret \"\(name)\": pass it in the replay's secrets")
        }
        let use = used[name, default: 0]
        used[name] = use + 1
        return .string(values[min(use, values.count - 1)])
    }

    /// What differs between a recorded step and the replayed one; `nil`: nothing.
    private func difference(expected: SessionRecording.Step, actual: SessionRecording.Step) -> String? {
        switch (expected, actual) {
        case (.reply(let a, let secret), .reply(let b, _)):
            // A secret the reply gave (a new token) is the build's own each time.
            let (x, y) = (masked(Self.parse(a), leaving: secret), masked(Self.parse(b), leaving: secret))
            if x == y { return nil }
            return JSONDifference.report("the reply", expected: x, actual: y, sides: Self.sides)
        case (.event(let a), .event(let b)):
            let (x, y) = (masked(Self.parse(a)), masked(Self.parse(b)))
            if x == y { return nil }
            let what = if case .event = expected { "event" } else { "reply" }
            return JSONDifference.report("the \(what)", expected: x, actual: y, sides: Self.sides)
        case (.call(let n, let backend, let arguments), .call(let m, let otherBackend, let otherArguments)):
            if n == m, backend == otherBackend, arguments == otherArguments { return nil }
            if backend != otherBackend { return "expected a call to \(backend); the build called \(otherBackend)" }
            return JSONDifference.report(
                "the arguments of the call to \(backend)", expected: arguments ?? .null, actual: otherArguments ?? .null, sides: Self.sides)
        case (.command(let a, _, _), .command(let b, _, _)):
            return a == b ? nil : "expected the command \(Self.shown(a)); the session ran \(Self.shown(b))"
        default:
            return expected == actual ? nil : "expected \(Self.describe(expected)); the build: \(Self.describe(actual))"
        }
    }

    /// What a difference calls the two sides.
    static let sides = ("recorded", "replayed")

    /// `json` with the ignored key paths, and `leaving`, taken out.
    private func masked(_ json: JSON, leaving secret: [String] = [], at path: String = "") -> JSON {
        let ignoring = secret.isEmpty ? self.ignoring : self.ignoring.union(secret)
        guard !ignoring.isEmpty else { return json }
        switch json {
        case .object(let object):
            var kept = JSONObject()
            for (key, value) in object.pairs {
                let inner = path.isEmpty ? key : "\(path).\(key)"
                if !ignoring.contains(inner) { kept[key] = masked(value, leaving: secret, at: inner) }
            }
            return .object(kept)
        case .array(let items):
            return .array(items.map { masked($0, leaving: secret, at: path) })
        default:
            return json
        }
    }

    private func divergence(at index: Int, after command: String?, _ difference: String) -> ReplayDivergence {
        ReplayDivergence(step: index + 1, of: transcript.count, command: command, difference: difference)
    }

    private static func parse(_ line: [UInt8]) -> JSON {
        (try? JSON.parse(line)) ?? .string(String(decoding: line, as: UTF8.self))
    }

    /// A recorded request as a person types it (`search thai`), its JSON when it has
    /// structured arguments.
    static func shown(_ request: JSON) -> String {
        guard let name = request["cmd"]?.stringValue else { return request.encoded }
        guard case .object(let arguments)? = request["args"] else { return name }
        let words = arguments.pairs.map { _, value -> String in
            switch value {
            case .string(let text): text
            case .int(let number): String(number)
            default: value.encoded
            }
        }
        return ([name] + words).joined(separator: " ")
    }

    static func describe(_ step: SessionRecording.Step) -> String {
        switch step {
        case .command(let request, _, _): "the command `\(shown(request))`"
        case .reply(let line, _): "the reply \(String(decoding: line.prefix(200), as: UTF8.self))"
        case .event(let line): "the event \(String(decoding: line.prefix(200), as: UTF8.self))"
        case .call(_, let backend, let arguments): "a call to \(backend)\(arguments.map { " with \($0.encoded.prefix(120))" } ?? "")"
        case .answer(_, let answer): "the call's answer (\(answer))"
        case .clock: "a reading of the clock"
        case .sleep(_, let seconds): "a sleep of \(seconds) s"
        case .woke(_, let cancelled): cancelled ? "a sleep cancelled" : "a sleep ended"
        }
    }
}

/// A replay found the build doing something other than the recording: where (the
/// step, counted from 1 after the header), after which command, and what differs.
public struct ReplayDivergence: Error, CustomStringConvertible {
    /// The step that differs, from 1 (the transcript's line number less the header).
    public let step: Int
    /// How many steps the transcript holds.
    public let of: Int
    /// The last command sent before it, as typed; `nil` before the first.
    public let command: String?
    /// What differs: a per-key diff for an event, a reply or a call's arguments.
    public let difference: String

    public var description: String {
        "the replay differs at step \(step) of \(of)\(command.map { " (after `\($0)`)" } ?? ""):\n\(difference)"
    }
}
