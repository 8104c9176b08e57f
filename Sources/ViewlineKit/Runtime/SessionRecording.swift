import Foundation
import Synchronization
import ViewlineProtocol

/// What a replay needs of one session, in the order its executor saw it: each
/// command as it ran (its secrets masked), each backend call with its arguments and
/// answer, each reading of the clock and each sleep the view-models made through
/// ``Services``, and every event and reply as sent. Kept on a server with the
/// inspector on, and exported as a transcript (`inspect export <session>`, see
/// docs/transcripts.md); `ViewlineTesting`'s `Replay` plays one back against a build.
///
/// Bounded like the timeline beside it: at most `maximumBytes` of steps (a line
/// counted by its bytes, every step with ``overhead`` more), charged against the
/// server's event log budget and the address's share a block at a time. It keeps
/// the beginning: once a step would pass a bound, the recording stops there and
/// says it was cut (a replay plays what was kept, and says where it ends).
///
/// Steps come from the session's executor and, for clock readings, from wherever
/// a view-model reads the clock: one lock, held for an append.
package final class SessionRecording: Sendable {
    /// One thing the session did or was given.
    package enum Step: Sendable, Equatable {
        /// A command as it began: its JSON request (`id`, `cmd`, `args`), the
        /// connection it came from, and the paths in `args` whose values were masked
        /// (`password`, `fields.password`: secrets a replay asks for).
        case command(JSON, connection: Int, masked: [String] = [])
        /// A reply, as its line was sent, but for the paths `masked` (`result.token`:
        /// a secret it gave, which a replay does not compare).
        case reply([UInt8], masked: [String] = [])
        /// An event, as its line was sent (every connection got the same).
        case event([UInt8])
        /// A backend was called (the `n`th call of the session), with the arguments
        /// the view-model named, if it did.
        case call(Int, backend: String, arguments: JSON?)
        /// The `n`th call's answer.
        case answer(Int, Answer)
        /// The clock read this (seconds since 1970).
        case clock(Double)
        /// A sleep (the `n`th) of this long began.
        case sleep(Int, seconds: Double)
        /// The `n`th sleep ended: it ran out, or its task was cancelled.
        case woke(Int, cancelled: Bool)
    }

    /// What a backend call answered.
    package enum Answer: Sendable, Equatable {
        /// Its result, encoded (it is `Encodable`).
        case value(JSON)
        /// It threw a `ProtocolError` (or an error that converts to one): its code
        /// and text, as a client would be told them; `cancelled`: a
        /// `CancellationError`.
        case failure(code: String, message: String)
        /// It threw a `ServiceError`: the backend's name and the text a person is shown.
        case serviceFailure(service: String, message: String)
        /// It threw an error of another type: only the type is kept (its text may
        /// hold anything: an address, a password in a URL), as the timeline keeps it.
        case opaqueFailure(type: String)
        /// It returned a value of this type, which is not `Encodable`: a replay of
        /// this call cannot serve it, and says so.
        case unrecordable(type: String)
    }

    /// What every step counts for beyond its own bytes: its slot (``Kept``'s stride)
    /// and a little for the block it is in.
    static let overhead = MemoryLayout<Kept>.stride + 16
    /// The budget is charged in blocks of this many bytes.
    static let chargeBlock = 4096
    /// Steps are kept in blocks of this many.
    static let blockSteps = 256

    /// A step as it is kept: what the session had at hand (its arguments, an encoded
    /// result's parts, a display's parts, the message), shared rather than copied
    /// or encoded; made a ``Step`` when it is read (an export, a replay's tap).
    enum Kept: Sendable {
        case step(Step)
        case command(name: String, id: JSON, arguments: JSONObject, connection: Int, masked: [String])
        case encodedReply(re: JSON, EncodedResult)
        // Boxed: a message is 136 bytes, which would make every slot that size.
        indirect case message(ServerMessage, masked: [String])
        case display(DisplayEvent)

        var step: Step {
            switch self {
            case .step(let step): return step
            case .command(let name, let id, let arguments, let connection, let masked):
                var request: JSONObject = ["cmd": .string(name)]
                if id != .null { request["id"] = id }
                if !arguments.pairs.isEmpty { request["args"] = .object(arguments) }
                return .command(.object(request), connection: connection, masked: masked)
            case .encodedReply(let re, let result): return .reply(result.replyLine(re: re))
            case .message(let message, let masked):
                let line = message.line
                if case .reply = message { return .reply(line, masked: masked) }
                return .event(line)
            case .display(let display): return .event(display.line)
            }
        }
    }

    private struct State {
        /// The steps, in blocks of ``blockSteps``: a long recording grows by a block,
        /// never by copying what it holds.
        var blocks: [[Kept]] = []
        var bytes = 0
        var charged = 0
        var cut = false
        var calls = 0
        var sleeps = 0
    }

    private let state = Mutex(State())
    /// Set once the recording is cut: a step is then not even built.
    private let stopped = Atomic<Bool>(false)
    let maximumBytes: Int
    private let budget: EventLogBudget?
    private let share: EventLogBudget.Share?
    /// Told of every step as it is kept (a replay compares them as they come).
    private let tap: (@Sendable (Step) -> Void)?
    /// When the recording began, by the wall clock.
    package let began = Date()

    /// A recording of at most `maximumBytes`, whose steps are told to `tap` too (a replay's).
    package convenience init(maximumBytes: Int, tap: (@Sendable (Step) -> Void)? = nil) {
        self.init(maximumBytes: maximumBytes, budget: nil, share: nil, tap: tap)
    }

    /// A session's recording, charged against the server's event log budget and its address's share.
    init(maximumBytes: Int, budget: EventLogBudget?, share: EventLogBudget.Share?, tap: (@Sendable (Step) -> Void)? = nil) {
        self.maximumBytes = maximumBytes
        self.budget = budget
        self.share = share
        self.tap = tap
    }

    deinit {
        let charged = state.withLock { $0.charged }
        budget?.add(-charged)
        share?.add(-charged)
    }

    /// The steps kept so far, and whether the recording was cut.
    package var steps: (steps: [Step], cut: Bool) {
        let (blocks, cut) = state.withLock { ($0.blocks, $0.cut) }
        return (blocks.flatMap { $0.map(\.step) }, cut)
    }
    /// The bytes the steps count for.
    package var bytes: Int { state.withLock { $0.bytes } }

    /// Whether steps are still kept (the recording was not cut): checked before a
    /// step's line is built.
    package var isOn: Bool { !stopped.load(ordering: .relaxed) }

    /// Keeps `step` unless the recording is cut, or is cut by it.
    package func record(_ step: Step) {
        keep(.step(step), size: Self.size(of: step))
    }

    /// Keeps what a step is made of, counted as `size` bytes.
    func keep(_ kept: Kept, size: Int) {
        let stored: Bool = state.withLock { state in
            guard !state.cut else { return false }
            if state.bytes + size > maximumBytes {
                state.cut = true
                stopped.store(true, ordering: .relaxed)
                return false
            }
            if state.bytes + size > state.charged {
                if let budget, budget.isOver || (share.map { $0.bytes > budget.addressLimit } ?? false) {
                    state.cut = true
                    stopped.store(true, ordering: .relaxed)
                    return false
                }
                let block = max(Self.chargeBlock, size)
                state.charged += block
                budget?.add(block)
                share?.add(block)
            }
            state.bytes += size
            // A block grows as arrays do (a short recording holds a short array); a
            // full one is left as it is and a new one begun.
            if state.blocks.isEmpty || state.blocks[state.blocks.count - 1].count == Self.blockSteps {
                state.blocks.append([])
            }
            state.blocks[state.blocks.count - 1].append(kept)
            return true
        }
        if stored, let tap { tap(kept.step) }
    }

    /// Numbers a backend call and records it (what `arguments` gives is encoded only
    /// now).
    package func call(backend: String, arguments: JSON?) -> Int {
        let number = state.withLock { state in
            state.calls += 1
            return state.calls
        }
        record(.call(number, backend: backend, arguments: arguments))
        return number
    }

    /// Numbers a sleep and records it.
    func sleep(seconds: Double) -> Int {
        let number = state.withLock { state in
            state.sleeps += 1
            return state.sleeps
        }
        record(.sleep(number, seconds: seconds))
        return number
    }

    /// What `json` holds in memory, or more, without encoding it: its strings'
    /// bytes, and ``nodeBytes`` for each value and each key (a value is kept as its
    /// tree, which takes more than its text: `{"a":1,…}` of 256 keys takes about 26
    /// bytes a key, measured).
    static func estimate(_ json: JSON) -> Int {
        switch json {
        case .string(let text): return nodeBytes + text.utf8.count
        case .array(let items): return items.reduce(nodeBytes) { $0 + estimate($1) }
        case .object(let object): return object.pairs.reduce(nodeBytes) { $0 + nodeBytes + $1.key.utf8.count + estimate($1.value) }
        default: return nodeBytes
        }
    }

    /// What one JSON value or key is counted as beyond its text.
    static let nodeBytes = 32

    /// About what a reply takes as its line, without building it.
    static func estimate(_ message: ServerMessage) -> Int {
        switch message {
        case .reply(let re, .success(let result)): 40 + estimate(re) + estimate(result)
        case .reply(let re, .failure(let error)): 80 + estimate(re) + error.code.rawValue.utf8.count + error.message.utf8.count
        default: message.line.count
        }
    }

    private static func size(of step: Step) -> Int {
        switch step {
        case .command(let request, _, let masked): overhead + estimate(request) + masked.reduce(0) { $0 + $1.utf8.count + 16 }
        case .reply(let line, _), .event(let line): overhead + line.count
        case .call(_, let backend, let arguments): overhead + backend.utf8.count + (arguments.map(estimate) ?? 0)
        case .answer(_, .value(let value)): overhead + estimate(value)
        case .answer(_, .failure(let code, let message)), .answer(_, .serviceFailure(let code, let message)):
            overhead + code.utf8.count + message.utf8.count
        case .answer(_, .opaqueFailure(let type)): overhead + type.utf8.count
        case .answer(_, .unrecordable(let type)): overhead + type.utf8.count
        case .clock, .sleep, .woke: overhead
        }
    }

    // MARK: - Answers

    /// Keys in order, so a transcript reads the same each time it is made.
    private static var sortedEncoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }

    /// `value` as the recording keeps a call's result: encoded when it is `Encodable`.
    package static func answer<T>(_ value: T) -> Answer {
        if T.self == Void.self { return .value(.null) }  // a call that returns nothing
        guard let encodable = value as? any Encodable else { return .unrecordable(type: "\(T.self)") }
        do {
            return .value(try JSON.parse(sortedEncoder.encode(encodable)))
        } catch {
            return .unrecordable(type: "\(T.self)")
        }
    }

    /// `value` encoded as JSON; `nil` when it cannot be.
    package static func encoded(_ value: some Encodable) -> JSON? {
        try? JSON.parse(sortedEncoder.encode(value))
    }

    /// A recorded answer as the call's result: its value decoded as `T`, or its
    /// failure thrown (a ``ProtocolError`` with the recorded code and text; a recorded
    /// cancellation as `CancellationError`).
    static func replayed<T>(_ answer: Answer, as type: T.Type, backend: String) throws -> T {
        switch answer {
        case .value(let json):
            if T.self == Void.self, let nothing = () as? T { return nothing }
            guard let decodable = T.self as? any Decodable.Type else {
                throw UnreplayableCall(backend: backend, type: "\(T.self)", reason: "it is not Decodable")
            }
            do {
                guard let value = try JSONDecoder().decode(decodable, from: JSONEncoder().encode(json)) as? T else {
                    throw UnreplayableCall(backend: backend, type: "\(T.self)", reason: "it decodes as another type")
                }
                return value
            } catch let error as UnreplayableCall {
                throw error
            } catch {
                throw UnreplayableCall(backend: backend, type: "\(T.self)", reason: "the recorded value does not decode as one: \(error)")
            }
        case .failure(let code, _) where code == "cancelled":
            throw CancellationError()
        case .failure(let code, let message):
            throw ProtocolError(ErrorCode(rawValue: code), message)
        case .serviceFailure(let service, let message):
            throw ServiceError(service, message)
        case .opaqueFailure(let type):
            throw ReplayedError(type: type)
        case .unrecordable(let type):
            throw UnreplayableCall(backend: backend, type: type, reason: "it is not Codable")
        }
    }

    /// `error` as the recording keeps a call's failure: the code a client is told,
    /// and the error's text.
    package static func answer(failure error: any Error) -> Answer {
        switch error {
        case let error as ProtocolError: .failure(code: error.code.rawValue, message: error.message)
        case let error as any ProtocolErrorConvertible:
            .failure(code: error.protocolError.code.rawValue, message: error.protocolError.message)
        case let error as ServiceError: .serviceFailure(service: error.service, message: error.message)
        case is CancellationError: .failure(code: "cancelled", message: "the call was cancelled")
        case let error as ReplayedError: .opaqueFailure(type: error.type)
        default: .opaqueFailure(type: String(describing: type(of: error)))
        }
    }
}

/// A view-model's clock on a session that records: each reading is a step.
struct RecordingClock: WallClock {
    let base: any WallClock
    let recording: SessionRecording

    func now() -> Date {
        let date = base.now()
        recording.record(.clock(date.timeIntervalSince1970))
        return date
    }
}

extension Services {
    /// These services with the clock and the sleep recorded into `recording`.
    func recorded(into recording: SessionRecording) -> Services {
        var services = self
        services.clock = RecordingClock(base: clock, recording: recording)
        let sleep = self.sleep
        services.sleep = { duration in
            let (seconds, attoseconds) = duration.components
            let number = recording.sleep(seconds: Double(seconds) + Double(attoseconds) / 1e18)
            do {
                try await sleep(duration)
            } catch {
                recording.record(.woke(number, cancelled: true))
                throw error
            }
            recording.record(.woke(number, cancelled: false))
        }
        return services
    }
}

/// Plays a recorded session back: the recording each replayed session keeps (to be
/// compared with the one played), and the recorded answer to each backend call,
/// served when the playback reaches it.
package protocol SessionReplayer: Sendable {
    /// The recording a replayed session keeps.
    func recording() -> SessionRecording
    /// Waits until the playback reaches the session's next call (as the recorded
    /// session's work reached it, not sooner); throws `CancellationError` when the
    /// calling work is cancelled meanwhile, as a recorded call would have been.
    func mayCall(backend: String) async throws
    /// The session's `number`th call could not take its recorded answer (it no longer
    /// decodes as what the view-model asks for): the replay says so at that answer.
    func couldNotReplay(call number: Int, _ error: any Error)
    /// The answer to the session's `number`th call, to `backend`, once the playback
    /// reaches it.
    func answer(call number: Int, backend: String) async -> SessionRecording.Answer
}

/// A replay reached a call whose recorded answer it cannot give back as the type the
/// view-model asks for now (it was not `Codable`, or its shape changed).
package struct UnreplayableCall: Error, CustomStringConvertible {
    package let backend: String
    package let type: String
    package let reason: String
    package var description: String { "the recorded answer of \"\(backend)\" cannot be given back as a \(type): \(reason)" }
}

/// A recorded backend error of a type the recording kept only by name, thrown
/// again in a replay: the client is told `internal_error`, as it was.
package struct ReplayedError: Error, CustomStringConvertible {
    package let type: String
    package var description: String { "an error of type \(type) (its text was not recorded)" }
}
