import Testing
import ViewlineKit

/// Drives view-models the way a client would, without a socket, and checks every
/// message the session sends — exhaustively by default, like TCA's `TestStore`: a
/// reply, display, alert or dismiss the test did not assert fails the test.
///
/// ```swift
/// let store = TestStore(apps: [Counter.self])
/// await store.send("increment", reply: ["count": 1])
/// await store.receive(Counter.self) { $0.count = 1 }
/// await store.finish()
/// ```
///
/// Expected states are written as changes to the previous expected state of the
/// same view (starting from its initial state), and compared in their wire form.
///
/// The same test body runs against a real server too (like Hummingbird's
/// `.router` and `.live`): ``init(apps:services:faults:admin:exhaustive:mode:sourceLocation:)`` with
/// ``Mode/live`` starts the apps on a loopback port and drives the session over TCP,
/// reading every line back as a client does — framing, parsing, the wire form and
/// the transport's ordering included.
///
/// ```swift
/// @Test(arguments: [TestStore.Mode.session, .live])
/// func counting(mode: TestStore.Mode) async throws {
///     let store = try await TestStore(apps: [Counter.self], mode: mode)
///     await store.send("increment", reply: ["count": 1])
///     await store.receive(Counter.self) { $0.count = 1 }
///     await store.finish()
/// }
/// ```
public final class TestStore {
    /// Where a store's session runs.
    public enum Mode: Sendable, CaseIterable, CustomTestStringConvertible {
        /// In this process, without a socket: lines go straight to the session.
        case session
        /// Behind a real server on a loopback port, over one TCP connection.
        case live

        public var testDescription: String { self == .session ? "session" : "live" }
    }

    /// The session under test; its application is built from the store's apps. In
    /// ``Mode/live`` it is the server's session for the store's connection.
    package let session: Session
    /// Where the session runs.
    public let mode: Mode
    private let live: LiveConnection?
    /// Every message the session sent, asserted or not.
    public let recorder: MessageRecorder
    /// When true (the default), messages nobody asserted fail the test at the next
    /// `send` and at ``finish(timeout:sourceLocation:)``.
    public var exhaustive: Bool
    /// How long `receive` waits for the next message (generous: a loaded CI machine
    /// can be slow — this package's parallel suites, whose synchronous end-to-end
    /// tests hold the two cooperative threads of a 2-core machine, held a display back
    /// past 30 s — and the wait only matters when the test is failing anyway).
    public var timeout: Duration = .seconds(120)

    private var asserted = 0
    private var expectedStates: [String: any Sendable] = [:]
    /// When the test answers the backend calls (`answeringCalls`): what holds each
    /// call until the test answers it, and the arguments the test said each was asked.
    private let calls: ReplayPlayer?
    private var askedArguments: [Int: (backend: String, arguments: JSON?, sourceLocation: SourceLocation)] = [:]

    /// A session running `apps` on `services` (fakes, a ``TestClock``), with admin
    /// commands on unless `admin` is false. A declared backend the services lack is
    /// recorded as a test issue. `peer` is the address the session's client comes
    /// from, as a server would give it (what per-address limits such as the log-in
    /// throttle count by); `nil`, the default, is a session with no address.
    ///
    /// With `answeringCalls`, no backend is called: each call waits until the test
    /// answers it (``answer(call:_:asked:value:sourceLocation:)``), as a test written
    /// from a recorded session does (`viewline --test-from`).
    public convenience init(
        apps: [any ViewModel.Type], services: Services = Services(), faults: FaultInjector = FaultInjector(),
        admin: Bool = true, exhaustive: Bool = true, id: String = "s1", peer: String? = nil, answeringCalls: Bool = false,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        let calls = answeringCalls ? ReplayPlayer(clockReadings: []) : nil
        let application = Self.application(
            apps, services: services, faults: faults, admin: admin, replayer: calls, sourceLocation: sourceLocation)
        let recorder = MessageRecorder()
        let session = Session(id: id, application: application, peer: peer, output: recorder.output)
        self.init(session: session, recorder: recorder, mode: .session, live: nil, exhaustive: exhaustive, calls: calls)
    }

    /// A session running `apps` on `services` in `mode`: with ``Mode/live``, behind a
    /// server of its own on a loopback port, reached over TCP.
    ///
    /// - Throws: when the server cannot start (a declared backend the services lack
    ///   is named) or the connection is not welcomed.
    public convenience init(
        apps: [any ViewModel.Type], services: Services = Services(), faults: FaultInjector = FaultInjector(),
        admin: Bool = true, exhaustive: Bool = true, mode: Mode, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws {
        let recorder = MessageRecorder()
        switch mode {
        case .session:
            let application = Self.application(apps, services: services, faults: faults, admin: admin, sourceLocation: sourceLocation)
            let session = Session(id: "s1", application: application, output: recorder.output)
            self.init(session: session, recorder: recorder, mode: .session, live: nil, exhaustive: exhaustive)
        case .live:
            var configuration = ServerConfiguration()
            configuration.host = "127.0.0.1"
            configuration.port = 0
            configuration.admin = admin
            configuration.eventLoops = 1
            let application = Application(apps, services: services, faults: faults, configuration: configuration)
            let (live, session) = try await LiveConnection.start(application, configuration: configuration, recorder: recorder)
            self.init(session: session, recorder: recorder, mode: .live, live: live, exhaustive: exhaustive)
        }
    }

    private init(
        session: Session, recorder: MessageRecorder, mode: Mode, live: LiveConnection?, exhaustive: Bool, calls: ReplayPlayer? = nil
    ) {
        self.session = session
        self.recorder = recorder
        self.mode = mode
        self.live = live
        self.exhaustive = exhaustive
        self.calls = calls
    }

    private static func application(
        _ apps: [any ViewModel.Type], services: Services, faults: FaultInjector, admin: Bool, replayer: (any SessionReplayer)? = nil,
        sourceLocation: SourceLocation
    ) -> Application {
        var configuration = ServerConfiguration()
        configuration.admin = admin
        configuration.replayer = replayer
        let application = Application(apps, services: services, faults: faults, configuration: configuration)
        // A store that answers the calls itself needs no backend.
        for backend in application.missingBackends where replayer == nil {
            Issue.record("the view-models call the backend \"\(backend.name)\" but the store's services lack it", sourceLocation: sourceLocation)
        }
        for issue in application.declarationIssues {
            Issue.record(Comment(rawValue: issue), sourceLocation: sourceLocation)
        }
        return application
    }

    // MARK: - Sending

    /// Sends one line (inline or JSON) and returns its reply, which must be the next message.
    @discardableResult
    public func send(_ line: String, sourceLocation: SourceLocation = #_sourceLocation) async -> Result<JSON, ProtocolError>? {
        if exhaustive { checkNothingUnasserted("before sending \"\(line)\"", sourceLocation) } else { asserted = recorder.all.count }
        if let live {
            do {
                try await live.send(line)
                _ = try await recorder.waitUntil(timeout: timeout, "the reply to \"\(line)\"") { [asserted] messages in
                    messages.dropFirst(asserted).contains(where: \.isReply)
                }
            } catch {}  // reported below, as in-process
        } else {
            await session.send(line)
        }
        let messages = recorder.all
        guard let index = messages.indices.dropFirst(asserted).first(where: { messages[$0].isReply }) else {
            Issue.record("\"\(line)\" got no reply", sourceLocation: sourceLocation)
            return nil
        }
        if exhaustive && index != asserted {
            Issue.record(
                "events arrived before the reply to \"\(line)\": \(messages[asserted..<index].map(\.text))",
                sourceLocation: sourceLocation)
        }
        asserted = index + 1
        guard case .reply(_, let result) = messages[index] else { return nil }
        return result
    }

    /// Sends a line and checks its reply's `result` exactly.
    public func send(_ line: String, reply expected: JSON, sourceLocation: SourceLocation = #_sourceLocation) async {
        switch await send(line, sourceLocation: sourceLocation) {
        case .success(let result)?:
            if result != expected {
                Issue.record(
                    Comment(rawValue: JSONDifference.report("the reply to \"\(line)\"", expected: expected, actual: result)),
                    sourceLocation: sourceLocation)
            }
        case .failure(let error)?:
            Issue.record("\"\(line)\" failed with \(error); wanted \(expected.encoded)", sourceLocation: sourceLocation)
        case nil: break
        }
    }

    /// Sends a line and checks that it fails with `code`.
    public func send(_ line: String, fails code: ErrorCode, sourceLocation: SourceLocation = #_sourceLocation) async {
        switch await send(line, sourceLocation: sourceLocation) {
        case .failure(let error)?:
            if error.code != code { Issue.record("\"\(line)\" failed with \(error); wanted \(code)", sourceLocation: sourceLocation) }
        case .success(let result)?:
            Issue.record("\"\(line)\" succeeded with \(result.encoded); wanted \(code)", sourceLocation: sourceLocation)
        case nil: break
        }
    }

    // MARK: - Receiving

    /// The next message must display `model`'s state as `change` leaves the state
    /// last expected for it.
    public func receive<Model: ViewModel>(
        _ model: Model.Type, sourceLocation: SourceLocation = #_sourceLocation, _ change: (inout Model.State) -> Void = { _ in }
    ) async {
        var expected = expectedStates[Model.view] as? Model.State ?? Model.initialState(session.services)
        change(&expected)
        expectedStates[Model.view] = expected
        // Compared as a client reads it: the expected state written and parsed back,
        // as the display was (`4.0` reads back as `4` on both sides).
        let want = (try? JSON(encoding: expected)).flatMap { JSON.readBack($0) } ?? .null
        await receiveDisplay(of: Model.view, want, sourceLocation)
    }

    /// The next message must display `model`'s view with exactly `state`, its wire
    /// form as a client reads it: for a state a test cannot write as a change to the
    /// last one (fields with private setters, wire fields computed from others).
    ///
    /// ```swift
    /// await store.receive(Playlist.self, state: ["items": [], "hasMore": false, "loading": true, "step": "fetching"])
    /// ```
    ///
    /// It leaves the state that a later `receive(_:_:)` of the view changes as it was.
    public func receive<Model: ViewModel>(_ model: Model.Type, state: JSON, sourceLocation: SourceLocation = #_sourceLocation) async {
        await receiveDisplay(of: Model.view, JSON.readBack(state) ?? state, sourceLocation)
    }

    private func receiveDisplay(of expectedView: String, _ want: JSON, _ sourceLocation: SourceLocation) async {
        guard let message = await next("a display of \(expectedView)", sourceLocation) else { return }
        guard case .display(_, let view, let state) = message, view == expectedView else {
            Issue.record("expected a display of \(expectedView), got \(message.text)", sourceLocation: sourceLocation)
            return
        }
        if state != want {
            Issue.record(
                Comment(rawValue: JSONDifference.report("\(expectedView) state", expected: want, actual: state)), sourceLocation: sourceLocation)
        }
    }

    /// The next message must present `content`; returns the alert's id.
    @discardableResult
    public func receiveAlert(_ content: AlertContent, sourceLocation: SourceLocation = #_sourceLocation) async -> String? {
        guard let message = await next("an alert", sourceLocation) else { return nil }
        guard case .alert(_, let id, let actual) = message else {
            Issue.record("expected an alert, got \(message.text)", sourceLocation: sourceLocation)
            return nil
        }
        if actual != content {
            let want = ServerMessage.alert(rev: message.rev ?? 0, id: id, content: content).json
            Issue.record(
                Comment(rawValue: JSONDifference.report("alert \(id)", expected: want, actual: message.json)), sourceLocation: sourceLocation)
        }
        return id
    }

    /// The next message must take alert `id` down unanswered.
    public func receiveDismiss(_ id: String, sourceLocation: SourceLocation = #_sourceLocation) async {
        guard let message = await next("a dismiss", sourceLocation) else { return }
        guard case .dismiss(_, let actual) = message, actual == id else {
            Issue.record("expected dismiss of \(id), got \(message.text)", sourceLocation: sourceLocation)
            return
        }
    }

    /// The next message must display `view` with exactly `state` (its wire form):
    /// for a test that names views, not models (one written from a recording).
    public func receiveDisplay(_ view: String, state: JSON, sourceLocation: SourceLocation = #_sourceLocation) async {
        await receiveDisplay(of: view, JSON.readBack(state) ?? state, sourceLocation)
    }

    /// The next message must be exactly `event`, as its wire JSON (`type`, `rev`
    /// and the rest).
    public func receive(event: JSON, sourceLocation: SourceLocation = #_sourceLocation) async {
        guard let message = await next("the event \(event.encoded.prefix(80))", sourceLocation) else { return }
        let want = JSON.readBack(event) ?? event
        if message.json != want {
            Issue.record(Comment(rawValue: JSONDifference.report("the event", expected: want, actual: message.json)), sourceLocation: sourceLocation)
        }
    }

    // MARK: - Answering backend calls

    /// Answers the session's `number`th backend call (from 1), to `backend`, with
    /// `value` (its result's JSON; `.null` for one that returns nothing). A call the
    /// session makes waits, as on a slow backend, until the test has answered as
    /// many calls as it is: answer a call the command makes before sending the
    /// command, a call of background work where the work has got to. With `asked`,
    /// the call must have been made with those arguments (`session.call(_:with:_:)`),
    /// checked at the next `receive` or at ``finish(timeout:sourceLocation:)``.
    ///
    /// Only on a store made with `answeringCalls: true`.
    public func answer(
        call number: Int, _ backend: String, asked arguments: JSON? = nil, value: JSON, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        answer(number, backend, arguments, .value(value), sourceLocation)
    }

    /// Answers the `number`th backend call by throwing `error` into the view-model,
    /// as a recording keeps it: a `ProtocolError` or `ServiceError` as it is, a
    /// `CancellationError` as one, an error of another type as its type alone.
    public func answer(
        call number: Int, _ backend: String, asked arguments: JSON? = nil, throwing error: any Error,
        sourceLocation: SourceLocation = #_sourceLocation
    ) {
        answer(number, backend, arguments, SessionRecording.answer(failure: error), sourceLocation)
    }

    private func answer(
        _ number: Int, _ backend: String, _ arguments: JSON?, _ answer: SessionRecording.Answer, _ sourceLocation: SourceLocation
    ) {
        guard let calls else {
            Issue.record("answer(call:) needs a store made with answeringCalls: true", sourceLocation: sourceLocation)
            return
        }
        askedArguments[number] = (backend, arguments, sourceLocation)
        calls.letCallThrough()
        calls.release(call: number, answer)
    }

    /// Checks the answered calls the session has made by now against what the test
    /// said each was asked; at the end (`final`), one never made is a failure too.
    private func checkCalls(final: Bool) {
        guard let calls else { return }
        for number in askedArguments.keys.sorted() {
            guard let made = calls.madeStep(.call(number)) else {
                if final, let (backend, _, sourceLocation) = askedArguments.removeValue(forKey: number) {
                    Issue.record("call \(number) to \(backend) was answered but never made", sourceLocation: sourceLocation)
                }
                continue
            }
            checkCall(number, made)
        }
    }

    private func checkCall(_ number: Int, _ made: SessionRecording.Step) {
        guard let (backend, arguments, sourceLocation) = askedArguments.removeValue(forKey: number) else { return }
        guard case .call(_, let actualBackend, let actualArguments) = made else { return }
        if actualBackend != backend {
            Issue.record("call \(number) went to \(actualBackend), not \(backend)", sourceLocation: sourceLocation)
        } else if let arguments, actualArguments != (JSON.readBack(arguments) ?? arguments) {
            Issue.record(
                Comment(
                    rawValue: JSONDifference.report(
                        "the arguments of call \(number) to \(backend)", expected: arguments, actual: actualArguments ?? .null)),
                sourceLocation: sourceLocation)
        }
    }

    /// Waits for the session's background work to settle, then fails the test for
    /// every message nobody asserted (when ``exhaustive``) and closes the session.
    /// In ``Mode/live``, it then closes the connection and shuts the server down.
    public func finish(timeout: Duration = .seconds(10), sourceLocation: SourceLocation = #_sourceLocation) async {
        await session.finishWork(timeout: timeout)
        if let live {
            // Everything the server wrote before now is read before anything is checked.
            do { try await live.sync(timeout: timeout) } catch {
                Issue.record("\(error)", sourceLocation: sourceLocation)
            }
        }
        if exhaustive { checkNothingUnasserted("at the end", sourceLocation) }
        checkCalls(final: true)
        calls?.finish()
        await session.close()
        await live?.close()
    }

    /// Marks every message so far as seen (for a non-exhaustive stretch of a test).
    public func skipReceived() { asserted = recorder.all.count }

    // MARK: - Helpers

    private func next(_ what: String, _ sourceLocation: SourceLocation) async -> ServerMessage? {
        checkCalls(final: false)
        let deadline = ContinuousClock.now + timeout
        while true {
            let messages = recorder.all
            if messages.count > asserted {
                asserted += 1
                return messages[asserted - 1]
            }
            guard ContinuousClock.now < deadline else { break }
            try? await Task.sleep(for: .milliseconds(1))
        }
        Issue.record("timed out waiting for \(what)", sourceLocation: sourceLocation)
        return nil
    }

    private func checkNothingUnasserted(_ when: String, _ sourceLocation: SourceLocation) {
        let messages = recorder.all
        guard messages.count > asserted else { return }
        let unasserted = messages[asserted...].map(\.text).joined(separator: "\n")
        Issue.record("\(messages.count - asserted) message(s) not asserted \(when):\n\(unasserted)", sourceLocation: sourceLocation)
        asserted = messages.count
    }
}

extension JSON {
    /// `value` written as a line's JSON and parsed again: what a client reads.
    static func readBack(_ value: JSON) -> JSON? {
        var bytes: [UInt8] = []
        value.write(into: &bytes)
        return try? JSON.parse(bytes)
    }
}

extension ServerMessage {
    var isReply: Bool { if case .reply = self { true } else { false } }
    var text: String { json.encoded }
}
