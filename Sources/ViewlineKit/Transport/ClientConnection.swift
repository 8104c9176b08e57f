import Foundation
import Logging
import NIOCore
import Synchronization

/// One client connection's way to its session. The event loop queues what it
/// reads (lines, the end of input, the disconnect) in order; one pump at a time
/// runs them on the session, isolated to it. The session lives on this
/// connection's event loop, so a command costs no thread hop: read, run, reply and
/// write happen on one thread, and a pipelined burst runs in one pump.
///
/// `attach` may move the connection to a session on another loop: the pump then
/// goes on there (a hop per command for that connection, and no other cost).
final class ClientConnection: Sendable {
    enum Input: Sendable {
        case frame(LineFrame)
        /// A line already decoded (it was read while nothing was queued, and its
        /// command awaits: see ``runNow(_:)``).
        case request(Request, bytes: Int)
        /// The client closed its sending side (`nc -N`): finish work, flush, close.
        case inputEnded
        /// The connection is gone: detach from the session.
        case disconnected
    }

    private struct State {
        /// Queued inputs from `head` on; empty (no storage) while idle.
        var inbox: [Input] = []
        var head = 0
        var pumping = false
        var session: Session
        /// The session given at `welcome`, until the connection leaves it.
        var own: Session?
        var finished = false
        /// Lines run in the current read without a task (see ``runNow(_:)``).
        var ranInRead = 0
    }

    let number: Int
    let channel: any Channel
    let outbound: OutboundLines
    /// What the connection holds on the way in (its framer stops when it is full).
    let budget: InputBudget
    /// The session told this connection `bye` and hung up on it (it never says it twice).
    private let hungUp = Atomic<Bool>(false)
    /// This connection as its session sees it.
    var link: SessionConnection { SessionConnection(self) }
    let peer: String?
    private unowned let server: ViewlineServer
    private let state: Mutex<State>
    /// Whether each command is logged (debug level): checked once, not per command.
    private let logsCommands: Bool
    private let transport: ServerMetrics.Transport
    /// The server's logger; lines name the session (not kept per connection: an
    /// idle connection holds no metadata).
    private let logger: Logger

    init(
        number: Int, channel: any Channel, outbound: OutboundLines, budget: InputBudget, session: Session,
        server: ViewlineServer, transport: ServerMetrics.Transport, logger: Logger
    ) {
        self.number = number
        self.budget = budget
        self.transport = transport
        self.channel = channel
        self.outbound = outbound
        self.server = server
        peer = channel.remoteAddress?.clientKey
        logsCommands = logger.logLevel <= .debug
        self.logger = logger
        state = Mutex(State(session: session, own: session))
    }

    /// Lines one pump runs before it lets the event loop serve other connections.
    static let linesPerTurn = 32
    /// Nothing queued and nothing being run: what a drain waits for.
    var isIdle: Bool {
        state.withLock { $0.finished || (!$0.pumping && $0.head >= $0.inbox.count) }
    }

    /// Runs a line at once when it can (``runNow(_:)``); otherwise queues what the
    /// event loop read, counted in the connection's ``InputBudget`` (whose framer stops
    /// handing lines over while it is full), and starts the pump when none runs.
    func receive(_ input: Input) {
        // Told `bye` (revoked, the session ended): nothing more it sends is run, even
        // while its backlog keeps the close waiting.
        if hungUp.load(ordering: .acquiring), case .frame = input { return }
        var input = input
        if case .frame(.line(let line)) = input {
            switch runNow(line) {
            case .ran: return
            case .queue(.frame(.line(let line))):
                // Its own bytes: a slice would keep the whole read's buffer alive.
                input = .frame(.line(ByteBuffer(buffer: line)))
            case .queue(let decoded): input = decoded
            }
        }
        let idle = state.withLock { state -> Session? in
            guard !state.finished else { return nil }
            if let cost = input.queuedBytes { budget.queued(byteCount: cost) }
            state.inbox.append(input)
            guard !state.pumping else { return nil }
            state.pumping = true
            return state.session
        }
        if let idle { startPump(on: idle) }
    }

    /// The event loop finished a read: the next read may run its first lines at once again.
    func readComplete() {
        state.withLock { $0.ranInRead = 0 }
    }

    private enum Immediate { case ran, queue(Input) }

    /// Runs a line in the read that brought it, with no task and no queue, when
    /// nothing of this connection's is queued or running, its session lives on this
    /// thread, and its command never suspends (most do not: see ``Command``). The
    /// first ``linesPerTurn`` lines of a read may run so; the rest of a long
    /// pipelined read queues, and the pump gives the loop back between slices.
    private func runNow(_ line: ByteBuffer) -> Immediate {
        let session = state.withLock { state -> Session? in
            guard !state.pumping, !state.finished, state.ranInRead < Self.linesPerTurn else { return nil }
            state.pumping = true  // anything read meanwhile queues behind this line
            state.ranInRead += 1
            return state.session
        }
        guard let session else { return .queue(.frame(.line(line))) }
        let immediate: Immediate = session.eventLoop.inEventLoop ? runNow(line, onItsLoop: session) : .queue(.frame(.line(line)))
        let queued = state.withLock { state -> Session? in
            state.pumping = false
            guard state.head < state.inbox.count else { return nil }
            state.pumping = true
            return state.session
        }
        if let queued { startPump(on: queued) }
        return immediate
    }

    /// ``runNow(_:on:)`` isolated to `session` from its event loop's thread: what
    /// `assumeIsolated` does once the caller checked `eventLoop.inEventLoop` (the
    /// session's executor is that loop), without asking the runtime again for every
    /// line (the check cost 5 % of a pipelined `ping`) and without a closure context
    /// to allocate (the function below captures nothing).
    ///
    /// - Precondition: `session.eventLoop.inEventLoop`.
    private func runNow(_ line: ByteBuffer, onItsLoop session: Session) -> Immediate {
        assert(session.eventLoop.inEventLoop)
        typealias Isolated = (ClientConnection, ByteBuffer, isolated Session) -> Immediate
        typealias Plain = (ClientConnection, ByteBuffer, Session) -> Immediate
        let run: Isolated = { connection, line, session in connection.runNow(line, on: session) }
        return unsafeBitCast(run, to: Plain.self)(self, line, session)
    }

    /// Decodes the line and runs its command if it never suspends; anything else
    /// (a closed session, no lease, `attach`, `quit`, a command that awaits) is left
    /// to the pump, decoded when it was.
    private func runNow(_ line: ByteBuffer, on session: isolated Session) -> Immediate {
        guard outbound.isOpen, admission(on: session) == .admitted else { return .queue(.frame(.line(line))) }
        guard let decoded = decode(line) else { return .ran }
        if logsCommands { log(decoded) }
        switch decoded {
        case .success(let request):
            // attach moves the connection to another session: the pump hands it over
            // (quit, which ends the connection, awaits its record and runs there too).
            guard request.name != "attach", session.handleNow(request, from: number) != nil else {
                return .queue(.request(request, bytes: line.readableBytes))
            }
            return .ran
        case .failure(let failure):
            session.reject(re: failure.re, failure.error, to: number)
            return .ran
        }
    }

    /// A framed line as a request, decoded from the read's bytes in place (`nil`: a
    /// blank line).
    private func decode(_ line: ByteBuffer) -> Result<Request, RequestDecoder.Failure>? {
        let commands = server.application.commands
        return line.withUnsafeReadableBytes { RequestDecoder.decode(buffer: $0.assumingMemoryBound(to: UInt8.self), commands: commands) }
    }

    /// Runs the queue on `session`'s executor: straight onto it when this thread is
    /// that executor (the common case), otherwise through one task.
    private func startPump(on session: Session) {
        if session.eventLoop.inEventLoop {
            session.assumeIsolated { $0.startPump(self) }
        } else {
            Task { await session.startPump(self) }
        }
    }

    /// Takes the next input, or ends the pump when there is none.
    private func next() -> Input? {
        let input = state.withLock { state -> Input? in
            guard state.head < state.inbox.count else {
                state.inbox = []
                state.head = 0
                state.pumping = false
                return nil
            }
            let input = state.inbox[state.head]
            state.inbox[state.head] = .inputEnded  // the slot lets go of the line's bytes
            state.head += 1
            if state.head >= 64 && state.head * 2 >= state.inbox.count {
                // A queue that never empties (a client pipelining slow commands) drops
                // what it ran, so it stays bounded by what waits.
                state.inbox.removeFirst(state.head)
                state.head = 0
            }
            return input
        }
        // Room made: a framer stopped for want of it goes on.
        if let cost = input?.queuedBytes { budget.dequeued(byteCount: cost) }
        return input
    }

    /// Runs every queued input on `session`, in order, until the queue is empty, the
    /// connection moves to another session, or it ends.
    func pump(_ session: isolated Session) async {
        var sinceYield = 0
        while let input = next() {
            switch input {
            case .frame, .request:
                // Cut off (its backlog passed the limit, or it hung up), or told `bye`:
                // the rest of what it sent is not run; the disconnect follows.
                guard outbound.isOpen, !hungUp.load(ordering: .acquiring) else { continue }
                // Fair to the loop's other connections: a long pipelined burst gives
                // the loop back every so often (as redis bounds what one client's
                // pipeline runs per event loop turn), so their commands and I/O wait
                // for at most a slice of it, not the whole burst.
                sinceYield += 1
                if sinceYield >= Self.linesPerTurn {
                    sinceYield = 0
                    await Task.yield()
                }
                switch await process(input, on: session) {
                case .next:
                    continue
                case .moved(let target):
                    state.withLock { state in
                        state.session = target
                        state.own = nil
                    }
                    // The rest of the queue runs on the new session, which may live on
                    // another loop; this pump ends.
                    startPump(on: target)
                    return
                case .ended:
                    finish(session)
                    return
                }
            case .inputEnded:
                // The client finished sending: let running work finish so its events
                // reach a piped script, then make sure they are written.
                await session.finishWork(timeout: .seconds(10))
                try? await outbound.drain()
                try? await channel.close()
            case .disconnected:
                finish(session)
                return
            }
        }
    }

    /// The connection is done: it leaves its session (which lives on, to be
    /// attached again until it expires) and the server.
    private func finish(_ session: isolated Session) {
        state.withLock { state in
            state.finished = true
            state.inbox = []
            state.head = 0
        }
        session.detach(number)
        server.application.sessions.detached(session)
        server.connectionEnded(number, transport: transport)
        logger.info("disconnected", metadata: ["session": "\(session.id)"])
    }

    private func log(_ decoded: Result<Request, RequestDecoder.Failure>) {
        let session = state.withLock { $0.session }
        var metadata: Logger.Metadata = ["session": "\(session.id)"]
        // In a cluster, the record the command is served for (a token's lookup part,
        // never its secret): `./dev chaos` checks from it that one node serves a
        // session at a time.
        if server.application.cluster != nil { metadata["record"] = "\(SessionRegistry.split(session.token).lookup)" }
        switch decoded {
        case .success(let request):
            metadata["cmd"] = "\(request.name)"
            logger.debug("command", metadata: metadata)
        case .failure(let failure):
            metadata["code"] = "\(failure.error.code.rawValue)"
            logger.debug("rejected", metadata: metadata)
        }
    }

    private enum Step { case next, moved(Session), ended }

    /// Whether a command may run on `session` now: the one check the immediate path
    /// and the pump share (the immediate path leaves anything but `.admitted` to the
    /// pump, which answers it).
    private enum Admission { case admitted, sessionClosed, noLease }

    private func admission(on session: isolated Session) -> Admission {
        if session.isClosed { return .sessionClosed }
        // In a cluster: no valid lease (another node may own this session by now), or
        // records that cannot be written (nothing acknowledged here would survive
        // this node), or this session's own record held back by another transaction's
        // row lock. Nothing runs until the node (or the session's record) is back.
        if let cluster = server.application.cluster, !cluster.acceptsCommands(for: session) { return .noLease }
        return .admitted
    }

    private func process(_ input: Input, on session: isolated Session) async -> Step {
        let application = server.application
        let admission = admission(on: session)
        if admission == .sessionClosed {
            // The session ended under this connection (quit elsewhere, eviction,
            // expiry racing an attach): say so rather than go silent, unless the
            // session already told this connection its `bye` (one per connection).
            if !hungUp.load(ordering: .acquiring) { outbound.send(ServerMessage.bye(.ended).line) }
            outbound.flushThenClose()
            return .ended
        }
        let decoded: Result<Request, RequestDecoder.Failure>
        switch input {
        case .frame(.line(let buffer)):
            guard let result = decode(buffer) else { return .next }
            decoded = result
            // Logged as served only when it runs: a command refused for want of a
            // lease was not served here (`./dev chaos` reads these lines).
            if logsCommands, admission == .admitted { log(decoded) }
        case .request(let request, _):
            decoded = .success(request)  // logged when it was decoded
        case .frame(.tooLong):
            guard admission == .admitted else { return .next }
            session.reject(
                re: .null,
                ProtocolError(
                    .lineTooLong, "line longer than \(server.configuration.maximumLineBytes) bytes; the rest of it was discarded"), to: number)
            return .next
        case .inputEnded, .disconnected:
            return .next
        }
        if admission == .noLease {
            // Lost sessions are closed when the lease is renewed; the others go on.
            switch decoded {
            case .success(let request): session.reject(re: request.id, Cluster.noLease, to: number, command: request.name)
            case .failure(let failure): session.reject(re: failure.re, Cluster.noLease, to: number)
            }
            return .next
        }
        switch decoded {
        case .success(let request) where request.name == "attach":
            let started = ContinuousClock.now
            let own = state.withLock { $0.own }
            guard let target = await server.application.attach(request, from: session, own: own, as: number, link: link, peer: peer) else {
                return .next
            }
            logger.debug("attached", metadata: ["session": "\(target.id)"])
            if let metrics = application.metrics {
                metrics.sessionsAttached.increment()
                metrics.command("attach", failed: nil, duration: ContinuousClock.now - started)
            }
            return target === session ? .next : .moved(target)
        case .success(let request):
            if await session.handle(request, from: number) == .close {
                // `quit` ends the session for good, on every connection.
                application.sessions.remove(session)
                session.close(.ended, except: number)
                outbound.send(ServerMessage.bye(.quit).line)
                try? await outbound.drain()
                channel.close(promise: nil)
                return .ended
            }
            return .next
        case .failure(let failure):
            session.reject(re: failure.re, failure.error, to: number)
            return .next
        }
    }
}

extension ClientConnection.Input {
    /// The bytes of a queued line, as the connection's ``InputBudget`` counts it (`nil`:
    /// not a line, not counted).
    fileprivate var queuedBytes: Int? {
        switch self {
        case .frame(.line(let line)): line.readableBytes
        case .request(_, let bytes): bytes
        case .frame(.tooLong): 0
        case .inputEnded, .disconnected: nil
        }
    }
}

extension ClientConnection: LineOutput {
    func send(line: [UInt8]) { outbound.send(line) }
    func send(reply re: JSON, result: EncodedResult) { outbound.send(reply: re, result: result) }
    func send(display: DisplayEvent) { outbound.send(display: display) }
    /// Closes the connection once what was sent to it (a `bye`) is written.
    func hangUp() {
        hungUp.store(true, ordering: .releasing)
        outbound.flushThenClose()
    }
}

extension Session {
    /// Starts a connection's pump as a task on this session's executor.
    func startPump(_ connection: ClientConnection) {
        Task { await connection.pump(self) }
    }
}
