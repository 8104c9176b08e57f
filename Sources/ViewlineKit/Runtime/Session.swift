import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization

/// One client's view-models: their states, the work they run and the alerts they
/// ask, behind one actor. Commands come in through `handle(_:from:)`; replies go
/// to the connection that sent the command, events to every attached connection.
/// A session outlives its connections: a client that reconnects attaches again and
/// gets what it missed from the session's bounded event log.
///
/// Ordering rules kept here: every command's reply precedes the events the command
/// causes (events raised while a command runs are held for the connection that sent
/// it until its reply is out; other connections get them at once), and `rev` grows
/// by one for every display, alert or dismiss, in the order they are sent.
///
/// View-model code gets a ``ViewSession`` for its model, an actor on this one's
/// executor (commands, `run` bodies, observation callbacks), so it reads and updates
/// states without `await`; the session itself is the runtime's, not public.
///
/// The actor runs on an event loop: a server's session on its first connection's
/// loop, so a command read there runs, replies and is written without leaving that
/// thread.
package actor Session {
    /// The event loop this session's code runs on.
    package nonisolated let eventLoop: any EventLoop
    /// The actor's executor: the session's event loop.
    package nonisolated let unownedExecutor: UnownedSerialExecutor
    /// The session's name in `welcome` and logs (`s1`).
    package nonisolated let id: String
    /// The secret that identifies this session to its owner; never logged. It keeps
    /// its lookup part for life; `end-others` changes the rest (``revokeOtherConnections(keeping:)``).
    package nonisolated var token: String { tokenBox.withLock { $0.string } }
    private nonisolated let tokenBox: Mutex<KeptToken>
    /// The view-models this session runs, and their services.
    package nonisolated let application: Application
    /// The client's address when it came over the network, as every per-client limit
    /// keys on it: an IPv4 address, or an IPv6 /64 (`SocketAddress.clientKey`). `nil` in tests.
    package nonisolated let peer: String?
    /// The order of this session's store writes, in a cluster only (``SessionWriteOrder``).
    private nonisolated let writeOrder: SessionWriteOrder?

    // Connections: every attached one gets every event; a reply goes to its sender.
    var connections: SessionConnections = [:]
    var log: EventLog
    /// What a session holds only once it used it (alerts, background work, a login,
    /// cluster bookkeeping…): made on the first write of one of them
    /// (Session+OccasionalFields.swift), so an idle session holds a word for them all.
    var occasional: OccasionalFields?

    /// The fields every command reads and writes: on a cache line of their own
    /// (``OwnCacheLine``), touched only on the session's executor and never across a
    /// call that could touch them again, so with no exclusivity check (two calls and
    /// a thread-local lookup per access, ~5 % of a pipelined `ping`'s samples all told).
    struct CommandFields {
        var rev = 0
        var held = HeldEvents()
        var closed = false
        var replyIsDurable = false
        var commandsRunning = 0
    }
    private let commandFields = OwnCacheLine(CommandFields())

    // Event ordering.
    var rev: Int {
        _read { yield commandFields.value.rev }
        _modify { yield &commandFields.value.rev }
    }
    /// Events held for each connection whose command is running, until its reply is out.
    var held: HeldEvents {
        _read { yield commandFields.value.held }
        _modify { yield &commandFields.value.held }
    }
    var closed: Bool {
        _read { yield commandFields.value.closed }
        _modify { yield &commandFields.value.closed }
    }
    /// The last rev handed to the connections (sent, or held for one whose command
    /// runs): what a lapse of the lease withheld comes after it.
    var sentRev = 0
    /// The connection count before the first change of this loop tick, while its
    /// display waits for the tick's end (``connectionCountChanged(from:)``).
    var connectionCountShownAt: Int?

    // Views: one state per view-model, in the application's order, made on first
    // use (an idle session holds none).
    private var madeStates: [any Sendable] = []
    /// The innermost state change running (``update(_:as:display:_:)``), linked to
    /// the ones it runs inside: where each state is while it changes (its slot in
    /// `states` holds a placeholder then), for what the change itself reads of its
    /// own view-model. On the changes' stacks: no allocation, a word per session.
    var changing: UnsafePointer<StateChange>?
    var states: [any Sendable] {
        _read {
            makeStatesIfNeeded()
            yield madeStates
        }
        _modify {
            makeStatesIfNeeded()
            lastEncodedView = -1  // a state may change: its kept encoding goes
            lastEncodedBytes = []
            yield &madeStates
        }
    }
    /// The view last encoded (`display`, `state`) while no state changed since, and its
    /// encoding: `state` of a view that did not change copies these bytes without going
    /// through the shared cache (its lock, a dynamic cast, the states' comparison).
    var lastEncodedView = -1
    var lastEncodedBytes: [UInt8] = []

    private func makeStatesIfNeeded() {
        if madeStates.count != application.views.count {
            madeStates = application.views.map { $0.makeState(application.services) }
        }
    }

    /// The command being finished was recorded durably before its reply (`end-others`
    /// once its token is recorded): its reply goes out even if the lease lapsed since.
    var replyIsDurable: Bool {
        _read { yield commandFields.value.replyIsDurable }
        _modify { yield &commandFields.value.replyIsDurable }
    }
    /// The views displayed so far (``hasDisplayed(_:)``), by index.
    var displayedViews = ViewIndexSet()
    /// Views whose state changed for display since their state last went out, in the
    /// order they first changed: each goes out once, with its latest state, when the
    /// work that changed it reaches its end or an await (``flushDisplays()``). The
    /// first apart (-1: none), so the common case — one view — allocates nothing.
    var pendingDisplay = -1
    /// The synchronous work running now sends what it displayed as it ends (an
    /// immediate command at its reply, an observation's callback as it returns): a
    /// display schedules no flush.
    var flushesDisplaysAtEnd = false

    // Background work (see Session+Tasks.swift).
    var runningWork = 0

    /// What the inspector shows of the session beside its event log, when it is on
    /// (see Session+Inspection.swift).
    let timeline: SessionTimeline?
    /// What a replay needs of the session, when the inspector is on or a replay runs
    /// it (see SessionRecording.swift), and the services its view-models reach then:
    /// the application's, their clock and sleep recorded.
    package nonisolated let recording: SessionRecording?
    private let recordedServices: Services?
    /// The command handlers this session's event loop runs (``Application/handlers(on:)``).
    let handlers: [AnyCommand]

    /// What the connection should do after a command.
    package enum Outcome: Sendable, Equatable {
        case keepOpen
        /// The client asked to leave: the caller sends `bye` and closes.
        case close
    }

    /// A session with one connection (number 0) that `output` stands for, as a test
    /// or a single client has it.
    package init(
        id: String, application: Application, peer: String? = nil, eventLoop: (any EventLoop)? = nil,
        output: @escaping @Sendable (ServerMessage) -> Void
    ) {
        self.init(id: id, application: application, peer: peer, eventLoop: eventLoop, connections: [0: SessionConnection(send: output, close: {})])
    }

    /// A session with no connection yet: ``connect(_:as:)`` and
    /// ``attach(_:as:lastRev:re:)`` add them. It runs on `eventLoop` (by default one
    /// of NIO's shared loops).
    package init(id: String, application: Application, peer: String? = nil, eventLoop: (any EventLoop)? = nil) {
        self.init(id: id, application: application, peer: peer, eventLoop: eventLoop, connections: [:])
    }

    private init(
        id: String, application: Application, peer: String?, eventLoop: (any EventLoop)?,
        connections: SessionConnections, token: String? = nil
    ) {
        let loop = eventLoop ?? NIOSingletons.posixEventLoopGroup.next()
        self.eventLoop = loop
        unownedExecutor = loop.executor.asUnownedSerialExecutor()
        self.id = id
        tokenBox = Mutex(KeptToken(token ?? application.tokens.make()))
        self.application = application
        self.peer = peer
        writeOrder = application.cluster == nil ? nil : SessionWriteOrder()
        self.connections = connections
        log = application.makeEventLog(address: peer)
        handlers = application.handlers(on: loop)
        timeline =
            application.inspects
            ? SessionTimeline(maximumBytes: application.sessions.limits.eventLogBytes / 2, budget: application.eventLogBudget, share: log.share)
            : nil
        if let replayer = application.replayer {
            recording = replayer.recording()
        } else if application.inspects, application.sessions.limits.recordingBytes > 0 {
            recording = SessionRecording(
                maximumBytes: application.sessions.limits.recordingBytes, budget: application.eventLogBudget, share: log.share)
        } else {
            recording = nil
        }
        recordedServices = recording.map { application.services.recorded(into: $0) }
    }

    deinit {
        // A session dropped without `close()` stops following its observations.
        for (_, stop) in occasional?.observations ?? [:] { stop() }
    }

    /// A session rebuilt from a cluster record (see Session+Record.swift): the same
    /// id and token, no connection yet.
    init(restoring id: String, token: String, peer: String?, application: Application) {
        self.init(id: id, application: application, peer: peer, eventLoop: nil, connections: [:], token: token)
    }

    /// The server's logger with this session's id in its metadata (`session=s1`): what
    /// view-model code logs through, and where the runtime logs a command's errors.
    package nonisolated var logger: Logger {
        var logger = application.logger
        logger[metadataKey: "session"] = "\(id)"
        return logger
    }

    /// The backends, database and clock this session's view-models reach.
    package nonisolated var services: Services { recordedServices ?? application.services }

    /// The first line a new connection gets.
    package nonisolated var welcome: ServerMessage {
        .welcome(session: id, token: token, server: application.serverName, maximumLineBytes: application.maximumLineBytes)
    }

    /// The connection whose command is running, for an awaiting command that acts on
    /// its own connection (`end-others`); `nil` outside one.
    @TaskLocal static var commandConnection: Int?

    /// Commands of this session started and not yet replied to (a drain waits for them).
    package internal(set) var commandsRunning: Int {
        _read { yield commandFields.value.commandsRunning }
        _modify { yield &commandFields.value.commandsRunning }
    }

    /// What a command still running gets just before its connection is told `bye`.
    static let unfinished = ProtocolError(
        .unavailable, "the session closed before this command finished; it may or may not have run")

    /// Answers `number`'s awaiting command (``unfinished``), if it has one: its
    /// connection is about to be told `bye`.
    func answerUnfinished(_ number: Int, on connection: SessionConnection, with error: ProtocolError = Session.unfinished) {
        guard let re = awaiting.removeValueReleasingStorage(forKey: number) else { return }
        connection.send(.reply(re: re, result: .failure(error)))
    }

    /// Answers every command still running (a shutdown whose drain timed out), so each
    /// connection's `bye` follows the reply to every line it began.
    package func answerUnfinishedCommands(_ error: ProtocolError) {
        guard !closed else { return }
        for (number, connection) in connections { answerUnfinished(number, on: connection, with: error) }
    }

    /// Waits (up to `timeout`) until no background work runs: used when the client
    /// stops sending but still reads, as `printf … | nc -N` does.
    package func finishWork(timeout: Duration) async {
        _ = await waitUntilSettled(timeout: timeout)
    }

    /// Stops all work; nothing more is sent. Every connection still attached
    /// (but `kept`) is told `bye` (its code and reason) and closed: a connection is never
    /// left on a session that no longer answers.
    package func close(_ bye: Bye = .ended, except kept: Int? = nil) {
        guard !closed else { return }
        flushDisplays()  // what was displayed goes before the `bye`
        application.metrics?.sessionsEnded.increment()
        for (number, connection) in connections where number != kept {
            answerUnfinished(number, on: connection)
            connection.send(.bye(bye))
            connection.close()
        }
        connections = [:]
        awaiting = [:]
        held.removeAll()
        log.removeAll()
        closed = true
        for (_, entry) in tasks { entry.task.cancel() }
        tasks = [:]
        for (_, stop) in occasional?.observations ?? [:] { stop() }
        observations = [:]
        let alerts = (presentedAlert.map { [$0] } ?? []) + queuedAlerts
        presentedAlert = nil
        queuedAlerts = []
        for alert in alerts { resolve(alert, .dismissed) }
        for (_, waiter) in settleWaiters { waiter.resume(returning: false) }
        settleWaiters = [:]
    }

    // MARK: - Output

    func reply(to connection: Int, _ message: ServerMessage, recorded command: AnyCommand? = nil) {
        guard !closed else { return }
        // A command's reply goes into the session's recording when its runs do.
        if let recording, recording.isOn, let command, command.isRecorded {
            let (kept, masked) = Self.recorded(message, of: command)
            recording.keep(.message(kept, masked: masked), size: SessionRecording.overhead + SessionRecording.estimate(kept))
        }
        connections[connection]?.send(message)
    }

    /// What a store checks before writing for this session: set while its commands
    /// and background work run, in a cluster only.
    nonisolated var fence: SessionFence? {
        guard let cluster = application.cluster, let writeOrder else { return nil }
        return SessionFence(
            session: String(decoding: token.utf8.prefix(SessionRegistry.lookupLength), as: UTF8.self), cluster: cluster,
            writes: writeOrder)
    }

    /// Whether this node may speak for the session now: always on a single node; in a
    /// cluster, only while its lease is valid (checked as each output goes, not only
    /// when a command starts: a node that lost its lease meanwhile says nothing).
    var leased: Bool {
        guard let cluster = application.cluster else { return true }
        if cluster.isServing() { return true }
        if !withheldWithoutLease { cluster.outputWithheld() }
        withheldWithoutLease = true
        return false
    }

    /// Sends an event just logged, unless the lease is not valid. When output was
    /// withheld and the lease is back before the cluster said so
    /// (``leaseRestored()``), what was withheld goes first, this event with it:
    /// sending it alone would move `sentRev` past the withheld events, and they would
    /// never reach the connections still open.
    private func broadcast(line: [UInt8]) {
        guard !closed, leased else { return }
        if withheldWithoutLease { return leaseRestored() }
        sentRev = rev
        deliver(line)
    }

    /// `line` to every connection, held for those whose command's reply is not out.
    func deliver(_ line: [UInt8]) {
        if held.isEmpty {
            for connection in connections.values { connection.send(line: line) }
            return
        }
        for (number, connection) in connections {
            if held.holds(number) {
                held.append(line, for: number)
            } else {
                connection.send(line: line)
            }
        }
    }

    /// A display to every connection as its parts; while a command runs, as a line
    /// like any other event (held for the connections whose reply is not out yet).
    private func broadcast(display: DisplayEvent) {
        guard held.isEmpty else { return broadcast(line: display.line) }
        guard !closed, leased else { return }
        if withheldWithoutLease { return leaseRestored() }
        sentRev = rev
        for connection in connections.values { connection.send(display: display) }
    }

    /// Sends (or holds) a view's new state as a `display` with the next `rev`, as
    /// its parts (``DisplayEvent``): no line is built for a connection that writes
    /// them straight out, and the log keeps the parts, the state's encoding shared.
    /// `viewPart` is the view's ``DisplayEvent/viewPart(_:)``. `only`: sent to that
    /// connection alone (a snapshot), logged all the same.
    func emitDisplay(viewPart: [UInt8], state: EncodedState, only target: SessionConnection? = nil) {
        guard !closed else { return }
        flushDisplays()
        rev += 1
        let display = DisplayEvent(rev: rev, viewPart: viewPart, state: state.bytes)
        log.appendDisplay(display)
        if let recording, recording.isOn { recording.keep(.display(display), size: SessionRecording.overhead + display.count) }
        logged(.display)
        guard let target else { return broadcast(display: display) }
        target.send(display: display)
        sentRev = rev
    }

    /// Sends (or holds, while a command runs) an event, giving it the next `rev`;
    /// keeps its line in the event log for clients that reconnect.
    func emit(only target: SessionConnection? = nil, _ make: (Int) -> ServerMessage) {
        guard !closed else { return }
        flushDisplays()
        rev += 1
        let event = make(rev)
        let line = event.line
        log.append(line, rev: rev)
        if let recording, recording.isOn { recording.keep(.step(.event(line)), size: SessionRecording.overhead + line.count) }
        logged(ServerMetrics.Event(event))
        guard let target else { return broadcast(line: line) }
        target.send(line: line)
        sentRev = rev
    }

    /// An event just logged: marks the session's record and counts it.
    private func logged(_ kind: ServerMetrics.Event?) {
        application.cluster?.changed(self)
        if let kind { application.metrics?.sent(kind) }
    }

    /// Whether `token` has the shape a session token has: 48 lowercase hex digits.
    /// Anything else is refused before any lookup.
    package static func isWellFormedToken(_ token: String) -> Bool {
        token.utf8.count == 48 && token.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }
    }

    /// A new token for this session (its lookup part kept, a new secret), not yet its
    /// own: `end-others` records it first. One change at a time: a second `end-others`
    /// while one is being recorded is refused (`unavailable`, try again).
    func beginTokenChange() throws(ProtocolError) -> String {
        guard !tokenChangeInFlight else {
            throw ProtocolError(.unavailable, "another end-others is being recorded; try again", retryAfter: 1)
        }
        tokenChangeInFlight = true
        return application.tokens.make(keepingLookupOf: token)
    }

    /// The token change was recorded (or failed): another may begin.
    func endTokenChange() {
        tokenChangeInFlight = false
    }

    /// The token becomes `fresh`: a link or token someone else holds no longer joins.
    func adoptToken(_ fresh: String) {
        tokenBox.withLock { $0 = KeptToken(fresh) }
    }

    /// A fresh unguessable secret: 192 random bits from the system generator, hex.
    package static func makeSecret() -> String {
        Hex.random(bytes: 24)
    }
}
