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
        /// A command already begun (it was read while nothing was queued, and it
        /// awaits: see ``runNow(_:)``).
        /// (Boxed: every line read at once is moved through this enum.)
        indirect case begun(Session.Suspended, bytes: Int)
        /// What the connection does next, as a command read at once said
        /// (``Session/Step/sessionEnded``).
        case step(Session.Step)
        /// The client closed its sending side (`nc -N`): finish work, flush, close.
        case inputEnded
        /// The connection is gone: detach from the session.
        case disconnected
    }

    /// (Its flags last: no padding between them and the words.)
    private struct State {
        /// Queued inputs from `head` on; empty (no storage) while idle.
        var inbox: [Input] = []
        var head = 0
        var session: Session
        /// The session given at `welcome`, until the connection leaves it.
        var own: Session?
        /// Lines run in the current read without a task (see ``runNow(_:)``).
        var ranInRead = 0
        var pumping = false
        var finished = false
    }

    let number: Int
    let outbound: OutboundLines
    /// What the connection holds on the way in (its framer stops when it is full).
    let budget: InputBudget
    /// The session told this connection `bye` and hung up on it (it never says it twice).
    private let hungUp = Atomic<Bool>(false)
    /// This connection as its session sees it.
    var link: SessionConnection { SessionConnection(self) }
    /// Where its commands come from, as the session's command path takes it.
    private var origin: CommandOrigin { CommandOrigin(connection: number, client: self) }
    /// The client's address (a trusted proxy may have said), as its output counts it.
    var peer: String? { outbound.address.isEmpty ? nil : outbound.address }
    private var channel: any Channel { outbound.channel }
    private unowned let server: ViewlineServer
    private let state: Mutex<State>
    /// Whether a line that is no command is logged (debug level): checked once.
    private let logsCommands: Bool
    private let transport: ServerMetrics.Transport
    /// The server's logger (reached through the server, only to log: an idle
    /// connection keeps no copy); lines name the session.
    private var logger: Logger { server.logger }

    init(
        number: Int, outbound: OutboundLines, budget: InputBudget, session: Session, server: ViewlineServer,
        transport: ServerMetrics.Transport
    ) {
        self.number = number
        self.budget = budget
        self.transport = transport
        self.outbound = outbound
        self.server = server
        logsCommands = server.logger.logLevel <= .debug
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

    /// Decodes the line and begins its command (``Session/begin(_:from:)``), which runs
    /// all of it unless it awaits; what awaits goes on in the pump.
    private func runNow(_ line: ByteBuffer, on session: isolated Session) -> Immediate {
        guard outbound.isOpen else { return .queue(.frame(.line(line))) }
        guard let decoded = decode(line) else { return .ran }
        switch decoded {
        case .success(let request):
            switch session.begin(request, from: origin) {
            case .finished(.next): return .ran
            case .finished(let step): return .queue(.step(step))
            case .suspended(let command): return .queue(.begun(command, bytes: line.readableBytes))
            }
        case .failure(let failure):
            if logsCommands { log(failure) }
            let step = session.reject(failure.error, re: failure.re, from: origin)
            return step == .next ? .ran : .queue(.step(step))
        }
    }

    /// A framed line as a request, decoded from the read's bytes in place (`nil`: a
    /// blank line), with the command table of its loop's ``ConnectionContext`` (not
    /// reached through the unowned, shared server: each such hop is an atomic retain
    /// on an object both event loops touch for every line).
    private func decode(_ line: ByteBuffer) -> Result<Request, RequestDecoder.Failure>? {
        outbound.context.decode(line)
    }

    /// Runs the queue on `session`'s executor, in a task that starts there (the
    /// session's executor is its event loop: from that thread, no hop).
    private func startPump(on session: Session) {
        if session.eventLoop.inEventLoop {
            session.assumeIsolated { startPump(onItsExecutor: $0) }
        } else {
            Task { await pump(session) }
        }
    }

    /// A task isolated to `session` from its start (it captures the isolated parameter).
    private func startPump(onItsExecutor session: isolated Session) {
        Task {
            await pump(session)
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
            case .frame, .begun, .step:
                // Fair to the loop's other connections: a long pipelined burst gives
                // the loop back every so often (as redis bounds what one client's
                // pipeline runs per event loop turn), so their commands and I/O wait
                // for at most a slice of it, not the whole burst.
                sinceYield += 1
                if sinceYield >= Self.linesPerTurn {
                    sinceYield = 0
                    await Task.yield()
                }
                // Cut off (its backlog passed the limit, or it hung up), or told `bye`
                // (checked after the yield, which an `end-others` may have come in):
                // the rest of what it sent is not run; the disconnect follows.
                guard outbound.isOpen, !hungUp.load(ordering: .acquiring) else { continue }
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

    /// A line that is no command, at debug level (commands are logged where they run).
    private func log(_ failure: RequestDecoder.Failure) {
        let session = state.withLock { $0.session }
        logger.debug("rejected", metadata: ["session": "\(session.id)", "code": "\(failure.error.code.rawValue)"])
    }

    private enum Step { case next, moved(Session), ended }

    /// Runs one queued input on `session` (through its command path) and says what
    /// the connection does next.
    private func process(_ input: Input, on session: isolated Session) async -> Step {
        let step: Session.Step
        switch input {
        case .frame(.line(let buffer)):
            guard let decoded = decode(buffer) else { return .next }
            switch decoded {
            case .success(let request):
                step = await session.run(request, from: origin)
            case .failure(let failure):
                if logsCommands { log(failure) }
                step = session.reject(failure.error, re: failure.re, from: origin)
            }
        case .begun(let command, _):
            step = await session.resume(command, from: origin)
        case .step(let next):
            step = next
        case .frame(.tooLong):
            step = session.reject(
                ProtocolError(.lineTooLong, "line longer than \(server.configuration.maximumLineBytes) bytes; the rest of it was discarded"),
                re: .null, from: origin)
        case .inputEnded, .disconnected:
            return .next
        }
        switch step {
        case .next:
            return .next
        case .moved(let target):
            return .moved(target)
        case .endConnection:
            // Its reply and `bye` are out once written.
            try? await outbound.drain()
            channel.close(promise: nil)
            return .ended
        case .sessionEnded:
            // The session ended under this connection (quit elsewhere, eviction,
            // expiry racing an attach): say so rather than go silent, unless the
            // session already told this connection its `bye` (one per connection).
            if !hungUp.load(ordering: .acquiring) { outbound.send(ServerMessage.bye(.ended).line) }
            outbound.flushThenClose()
            return .ended
        }
    }
}

extension ClientConnection.Input {
    /// The bytes of a queued line, as the connection's ``InputBudget`` counts it (`nil`:
    /// not a line, not counted).
    fileprivate var queuedBytes: Int? {
        switch self {
        case .frame(.line(let line)): line.readableBytes
        case .begun(_, let bytes): bytes
        case .frame(.tooLong): 0
        case .step, .inputEnded, .disconnected: nil
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

extension ClientConnection: LineReceiver {
    /// A line (or an overlong one) from its framer.
    func received(_ frame: LineFrame) {
        receive(.frame(frame))
    }

    func inputEnded() {
        receive(.inputEnded)
    }

    /// The channel closed: its backlog leaves the counts, and it leaves its session.
    func channelInactive() {
        outbound.closed()
        receive(.disconnected)
    }
}

extension ClientConnection: MovableConnection {
    var ownSession: Session? { state.withLock { $0.own } }
}
