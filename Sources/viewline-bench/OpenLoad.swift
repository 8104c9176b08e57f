import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Open-loop load: commands fall due on a fixed schedule, `rate` per second in all,
/// dealt round-robin over `sessions` connections, whatever the server does. A
/// command's latency runs from when it was due to its reply: while the server
/// stalls, every command that falls due meanwhile is late by what it waited, as its
/// user would see (no coordinated omission: a closed loop would have sent nothing
/// and measured nothing). A connection whose previous command is unanswered keeps
/// the new one until that reply (one command in flight per session, as a client
/// does), and its wait counts.
///
/// The mix, by the command's number modulo 10 (so every connection keeps one kind):
/// 4 searches with results (`search <word>`, ranked on the server's pool), 3 `state
/// search`, 2 `ping`, 1 an alert asked and answered (`playlist` asks the login
/// alert, the same connection's next one `cancel`s it).
///
/// One thread, one `epoll` set, and a `timerfd` armed for the next due time, so a
/// command is sent when it falls due, not at the next millisecond; the generator's
/// own lag (sent − due for a command whose connection was free) is reported.
struct OpenLoad {
    let port: Int
    let sessions: Int

    struct Run {
        var target = 0.0
        /// Replies per second over the run.
        var achieved = 0.0
        /// Due-to-reply latencies, µs.
        var latencies: [Double] = []
        /// The same latencies by kind of command (``kinds``), each sorted.
        var latenciesByKind: [[Double]] = Array(repeating: [], count: OpenLoad.kinds.count)
        /// Sent − due for commands sent at once, µs.
        var lag: [Double] = []
        /// Commands due and not answered when the run ended.
        var unanswered = 0
        /// Commands of the run before still unanswered when this one began (after
        /// waiting 30 s for them): their replies may be taken for this run's.
        var leftInFlight = 0
        var failedConnections = 0

        func percentile(_ values: [Double], _ p: Double) -> Double {
            values.isEmpty ? 0 : values[min(values.count - 1, Int(Double(values.count) * p))]
        }
    }

    /// The kinds of command in the mix, as ``Run/latenciesByKind`` lists them.
    static let kinds = ["search", "state", "ping", "alert"]

    /// The kind (an index of ``kinds``) of a connection's commands.
    private static func kind(of connection: Connection) -> Int {
        switch connection.kind {
        case 0...3: 0
        case 4...6: 1
        case 7, 8: 2
        default: 3
        }
    }

    static let words = ["pizza", "thai", "coffee", "sushi", "tacos", "noodles", "bakery", "vegan"]

    private final class Connection {
        let fd: Int32
        let kind: Int
        /// When each command waiting for its turn fell due (ns), oldest first.
        var waiting: [UInt64] = []
        var waitingHead = 0
        /// When the command in flight fell due (ns); 0: none in flight.
        var inFlightDue: UInt64 = 0
        var alertUp = false
        var sent = 0
        var replies = ReplyLines()
        init(fd: Int32, kind: Int) {
            self.fd = fd
            self.kind = kind
        }
    }

    private var connections: [Connection] = []
    private var byDescriptor: [Int32: Connection] = [:]
    private let epoll: Int32
    private let timer: Int32

    /// Opens the sessions (each reads its welcome) before anything is measured.
    init(port: Int, sessions: Int) {
        self.port = port
        self.sessions = sessions
        epoll = epoll_create1(0)
        timer = timerfd_create(CLOCK_MONOTONIC, Int32(TFD_NONBLOCK))
        var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: timer))
        epoll_ctl(epoll, EPOLL_CTL_ADD, timer, &event)
        for index in 0..<sessions {
            guard let fd = ViewlineBench.connect(port: port) else { continue }
            var reader = LineReader(fd: fd)
            guard reader.next() != nil else {
                Glibc.close(fd)
                continue
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: fd))
            epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
            let connection = Connection(fd: fd, kind: index % 10)
            connections.append(connection)
            byDescriptor[fd] = connection
        }
    }

    func close() {
        for connection in connections { Glibc.close(connection.fd) }
        Glibc.close(timer)
        Glibc.close(epoll)
    }

    var opened: Int { connections.count }

    private static func now() -> UInt64 {
        var time = timespec()
        clock_gettime(CLOCK_MONOTONIC, &time)
        return UInt64(time.tv_sec) * 1_000_000_000 + UInt64(time.tv_nsec)
    }

    private func arm(at due: UInt64) {
        var spec = itimerspec()
        spec.it_value.tv_sec = Int(due / 1_000_000_000)
        spec.it_value.tv_nsec = Int(due % 1_000_000_000)
        timerfd_settime(timer, Int32(TFD_TIMER_ABSTIME), &spec, nil)
    }

    /// The line a connection of `kind` sends next.
    private func line(for connection: Connection) -> [UInt8] {
        let text: String
        switch Self.kind(of: connection) {
        case 0: text = "search \(Self.words[(connection.sent + connection.kind) % Self.words.count])"
        case 1: text = "state search"
        case 2: text = "ping"
        default:
            text = connection.alertUp ? "cancel" : "playlist"
            connection.alertUp.toggle()
        }
        connection.sent += 1
        return Array((text + "\n").utf8)
    }

    private func send(_ connection: Connection, due: UInt64) -> Bool {
        connection.inFlightDue = due
        let bytes = line(for: connection)
        return bytes.withUnsafeBytes { Glibc.send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == bytes.count
    }

    /// Reads what `fd` has (the timer's expirations, or a connection's lines): the
    /// connection when it brought the reply to its command in flight.
    private func answered(_ fd: Int32, into buffer: inout [UInt8]) -> Connection? {
        if fd == timer {
            var expirations: UInt64 = 0
            _ = read(timer, &expirations, 8)
            return nil
        }
        guard let connection = byDescriptor[fd] else { return nil }
        let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        guard count > 0 else {
            // The server hung up (or the link failed): a closed socket stays readable to a
            // level-triggered epoll, so it leaves the set, or the generator (at real-time
            // priority on its core) would spin on it until the run's end.
            if count == 0 || (errno != EAGAIN && errno != EINTR) {
                var none = epoll_event()
                epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &none)
            }
            return nil
        }
        let replies = buffer.withUnsafeBytes { connection.replies.count(in: UnsafeRawBufferPointer(rebasing: $0[0..<count])) }
        return replies > 0 && connection.inFlightDue != 0 ? connection : nil
    }

    /// Reads the replies of the commands still in flight (an overloaded run ends with
    /// some), so that each connection's next reply is its next command's; gives up
    /// after `timeout` seconds and returns how many were still unanswered.
    func drain(timeout: Double) -> Int {
        var inFlight = connections.reduce(0) { $0 + ($1.inFlightDue != 0 ? 1 : 0) }
        let deadline = Self.now() + UInt64(timeout * 1e9)
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        var buffer = [UInt8](repeating: 0, count: 65536)
        while inFlight > 0 && Self.now() < deadline {
            let ready = epoll_wait(epoll, &events, Int32(events.count), 100)
            for index in 0..<Int(max(0, ready)) {
                guard let connection = answered(events[index].data.fd, into: &buffer) else { continue }
                connection.inFlightDue = 0
                inFlight -= 1
            }
        }
        return inFlight
    }

    /// Runs the schedule at `rate` commands per second for `seconds`, then waits up to
    /// two seconds for the replies still due. First it reads the replies a run before
    /// left in flight (``drain(timeout:)``): a reply of the last run's counted as one
    /// of this run's would time the wrong command.
    func run(rate: Double, seconds: Double) -> Run {
        var result = Run()
        result.leftInFlight = drain(timeout: 30)
        result.target = rate
        let interval = 1e9 / rate
        let start = Self.now() + 10_000_000
        let total = Int(rate * seconds)
        let stop = start + UInt64(seconds * 1e9)
        var next = 0
        var answered = 0
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        var buffer = [UInt8](repeating: 0, count: 65536)
        result.latencies.reserveCapacity(total)
        result.lag.reserveCapacity(total)
        for connection in connections {
            connection.inFlightDue = 0
            connection.waiting = []
            connection.waitingHead = 0
        }
        var lastReply = start
        arm(at: start)
        while true {
            let now = Self.now()
            // Every command due by now: sent on a free connection, or kept for its turn.
            while next < total {
                let due = start + UInt64(Double(next) * interval)
                guard due <= now else {
                    arm(at: due)
                    break
                }
                let connection = connections[next % connections.count]
                next += 1
                if connection.inFlightDue == 0 {
                    result.lag.append(Double(Self.now() - due) / 1000)
                    if !send(connection, due: due) { result.failedConnections += 1 }
                } else {
                    connection.waiting.append(due)
                }
            }
            if next >= total && answered + result.failedConnections >= total { break }
            if now > stop + 2_000_000_000 { break }
            let ready = epoll_wait(epoll, &events, Int32(events.count), next >= total ? 100 : 50)
            guard ready > 0 else { continue }
            for index in 0..<Int(ready) {
                guard let connection = self.answered(events[index].data.fd, into: &buffer) else { continue }
                let at = Self.now()
                lastReply = at
                answered += 1
                let latency = Double(at - connection.inFlightDue) / 1000
                result.latencies.append(latency)
                result.latenciesByKind[Self.kind(of: connection)].append(latency)
                connection.inFlightDue = 0
                if connection.waitingHead < connection.waiting.count {
                    let due = connection.waiting[connection.waitingHead]
                    connection.waitingHead += 1
                    if !send(connection, due: due) { result.failedConnections += 1 }
                }
            }
        }
        result.unanswered = total - answered
        result.achieved = Double(answered) / (Double(max(lastReply, stop) - start) / 1e9)
        result.latencies.sort()
        for kind in result.latenciesByKind.indices { result.latenciesByKind[kind].sort() }
        result.lag.sort()
        return result
    }
}
