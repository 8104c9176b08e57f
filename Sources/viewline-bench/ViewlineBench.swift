import ArgumentParser
import CEpoll
import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// `viewline-bench`: load from a second process, on loopback only. Each connection
/// sends `ping` and waits for its reply (round trips), or keeps `depth` pings in
/// flight (pipelined), for a bounded time, then prints the rate and latency. One
/// epoll thread drives every measured connection (``EpollLoad``).
@main
struct ViewlineBench: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "viewline-bench",
        abstract: "Measure a viewline-server's command rate over loopback TCP.")

    @Option(help: "Server port on 127.0.0.1.") var port = 7878
    @Option(help: "Concurrent connections.") var connections = 50
    @Option(help: "Seconds to run (at most 60).") var seconds = 5.0
    @Option(help: "Commands in flight per connection (1 = ping-pong).") var depth = 1
    @Option(help: "The command line to send.") var command = "ping"
    @Option(help: "A line each connection sends first, waiting for its reply (e.g. \"login alice wonderland\").") var setup: String?
    @Flag(help: "The server is redis-server: no welcome line (send an inline command such as PING).") var redis = false
    @Flag(help: "Print only: commands/s, p50 µs, p99 µs (for tables).") var brief = false
    @Flag(help: "--port is a --web-port: speak WebSocket at /ws, one text message per command.") var websocket = false
    @Option(help: "Idle-memory scenario: open this many sessions (one ping each) and report the server's RSS growth.") var idle = 0
    @Option(help: "Fan-out scenario: this many sessions show contacts; one change must reach them all.") var fanout = 0
    @Option(help: "With --fanout: this many changes, one after the other, each reported on its own line (runs in a row).") var fanoutChanges = 1
    @Flag(
        help:
            "With --fanout: the server is the floor (--floor-server): each change is a line asking it to write a contacts-sized display to every connection."
    ) var floor = false
    @Option(
        help:
            "Detached-session scenario: open this many sessions, each runs --command and settles, then hangs up; reports the server's RSS growth per session and how fast 1,000 of them attach again."
    ) var detached = 0
    @Option(
        help:
            "Expiry scenario: open this many sessions at once (16 at a time), each runs --command and hangs up; then ping another session until they have all expired (--expire-after) and report the longest ping."
    ) var expiry = 0
    @Option(help: "With --expiry: the server's --session-ttl, in seconds.") var expireAfter = 0.0
    @Option(help: "Fan-out across a cluster: other nodes' ports (comma-separated); sessions are spread over every node, the sync runs on --port.")
    var otherPorts = ""
    @Option(help: "The server's pid (idle memory, from /proc; with --cpu, its CPU time).") var serverPid = 0
    @Flag(help: "With --server-pid: print only the server's CPU time (user + system, from /proc/PID/stat) per command, in µs.") var cpu = false
    @Option(help: "The server's --remote-contacts file (fan-out rewrites it).") var contactsFile = ""
    @Option(help: "Extra connections that flood the server meanwhile (not measured).") var flood = 0
    @Option(help: "What the flooding connections send, each waiting for its reply.") var floodCommand = "login alice wrong-password"
    @Option(
        help:
            "Reconnect-storm scenario: open this many connections at once and report when the last welcome came, p50/p99 of the welcomes, and the kernel's listen-queue overflows and SYN retransmits meanwhile."
    ) var storm = 0
    @Option(
        help:
            "Open-loop scenario: this many sessions; commands fall due on a schedule (a mix of searches, state, ping and alerts answered) and latency counts from when each was due. Finds the highest rate sustained, then reports p50/p99/p99.9 at 25, 50, 75 and 90 % of it."
    ) var openLoop = 0
    @Option(help: "With --open-loop: seconds per measured rate.") var openLoopSeconds = 5.0
    @Option(help: "With --open-loop: run at this rate only (commands/s), --open-loop-runs times, instead of finding the highest (for an A/B).")
    var openLoopRate = 0.0
    @Option(help: "With --open-loop-rate: how many runs.") var openLoopRuns = 1
    @Option(
        help:
            "Measure nothing: serve the floor (a bare SwiftNIO line server answering each line as `ping`, nothing decoded) with this many event loops on 127.0.0.1:--port (0: any), printing `listening on`, until stopped."
    ) var floorServer = 0
    @Option(
        help:
            "With --floor-server: each connection's first receive buffer in bytes, growing with its reads as Viewline's does (0: SwiftNIO's default, a fixed 2 KiB)."
    ) var floorReceiveBuffer = 0

    func validate() throws {
        guard (1...1000).contains(connections) else { throw ValidationError("--connections must be 1...1000") }
        guard seconds > 0 && seconds <= 60 else { throw ValidationError("--seconds must be in (0, 60]") }
        guard (1...1000).contains(depth) else { throw ValidationError("--depth must be 1...1000") }
        guard (0...200).contains(flood) else { throw ValidationError("--flood must be 0...200") }
        guard (1...1000).contains(fanoutChanges) else { throw ValidationError("--fanout-changes must be 1...1000") }
        guard (0...1_000_000).contains(openLoopRate), (1...100).contains(openLoopRuns) else {
            throw ValidationError("--open-loop-rate must be 0...1000000 and --open-loop-runs 1...100")
        }
        guard (0...64).contains(floorServer) else { throw ValidationError("--floor-server must be 0...64") }
        guard (0...65536).contains(floorReceiveBuffer) else { throw ValidationError("--floor-receive-buffer must be 0...65536") }
    }

    func run() throws {
        if floorServer > 0 { return try FloorServer.run(eventLoops: floorServer, port: port, receiveBuffer: floorReceiveBuffer) }
        if idle > 0 { return try idleMemory() }
        if detached > 0 { return try detachedSessions() }
        if expiry > 0 { return try expiryPause() }
        if fanout > 0 { return try fanOut() }
        if storm > 0 { return connectStorm() }
        if openLoop > 0 { return openLoopCurve() }
        let flooding = Atomic<Bool>(true)
        let line = Array((command + "\n").utf8)
        let group = DispatchGroup()
        let flooded = Atomic<Int>(0)
        let floodLine = Array((floodCommand + "\n").utf8)
        for _ in 0..<flood {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                guard let fd = Self.connect(port: port) else { return }
                defer { close(fd) }
                var reader = LineReader(fd: fd)
                guard reader.next() != nil else { return }
                while flooding.load(ordering: .relaxed), Self.write(fd, floodLine), reader.next() != nil {
                    flooded.add(1, ordering: .relaxed)
                }
            }
        }
        if flood > 0 { usleep(200_000) }  // the flood is on before measuring starts
        if cpu { guard serverPid > 0 else { throw ValidationError("--cpu needs --server-pid") } }
        let cpuBefore = cpu ? Self.cpuSeconds(serverPid) : 0
        var scenario = EpollLoad(port: port, connections: connections, depth: depth, line: line, welcome: !redis, setup: setup, seconds: seconds)
        scenario.websocket = websocket
        let load = scenario.run()
        flooding.store(false, ordering: .relaxed)
        group.wait()
        if cpu {
            // What the server spent per command, whatever the generator did meanwhile:
            // steadier than a rate on a shared machine.
            let spent = Self.cpuSeconds(serverPid) - cpuBefore
            print(String(format: "%.2f", load.commands > 0 ? spent / Double(load.commands) * 1e6 : 0))
            return
        }
        let rate = Double(load.commands) / seconds
        let sorted = load.latencies.sorted()
        func percentile(_ p: Double) -> Double { sorted.isEmpty ? 0 : sorted[min(sorted.count - 1, Int(Double(sorted.count) * p))] }
        if brief {
            print(String(format: "%.0f %.0f %.0f", rate, percentile(0.5), percentile(0.99)))
            return
        }
        print(
            String(
                format: "%@ x%d connections, depth %d, %.1fs: %.0f commands/s; batch latency p50 %.0f µs, p99 %.0f µs; %d failed connections",
                command, connections, depth, seconds, rate, percentile(0.5), percentile(0.99), load.failedConnections))
        if flood > 0 {
            print(
                String(
                    format: "  meanwhile %d connections sent \"%@\": %.0f/s", flood, floodCommand, Double(flooded.load(ordering: .relaxed)) / seconds)
            )
        }
    }

    /// The open-loop curve (``OpenLoad``): the highest rate sustained (every command
    /// answered, p99 under 200 ms, and answered at the rate they fell due: the last
    /// reply at most 1 % of the probe after its end, so no backlog grew; found by
    /// growing the rate by half, then halving the gap three times, 3 s a probe, each
    /// halving after 2 s for the server to drain what an overloaded probe left), then
    /// each share of it for --open-loop-seconds, each after 2 s as well.
    func openLoopCurve() {
        let load = OpenLoad(port: port, sessions: openLoop)
        defer { load.close() }
        func sustained(_ run: OpenLoad.Run) -> Bool {
            run.unanswered == 0 && run.failedConnections == 0 && run.leftInFlight == 0 && run.percentile(run.latencies, 0.99) < 200_000
                && run.achieved >= 0.99 * run.target
        }
        func line(_ label: String, _ run: OpenLoad.Run) -> String {
            String(
                format: "%@ %.0f %.0f %.0f %.0f %.0f %.0f", label, run.target, run.achieved, run.percentile(run.latencies, 0.5),
                run.percentile(run.latencies, 0.99), run.percentile(run.latencies, 0.999), run.percentile(run.lag, 0.99))
        }
        if openLoopRate > 0 {
            if !brief { print("\(load.opened) of \(openLoop) sessions open\nrate target/s achieved/s p50-µs p99-µs p99.9-µs generator-lag-p99-µs") }
            for _ in 0..<openLoopRuns {
                let run = load.run(rate: openLoopRate, seconds: openLoopSeconds)
                print(line(String(format: "%.0f", openLoopRate), run))
                if !brief {
                    let kinds = zip(OpenLoad.kinds, run.latenciesByKind).map { kind, latencies in
                        String(format: "%@ p50 %.0f p99 %.0f µs", kind, run.percentile(latencies, 0.5), run.percentile(latencies, 0.99))
                    }
                    print("  " + kinds.joined(separator: ", "))
                }
            }
            return
        }
        if !brief { print("\(load.opened) of \(openLoop) sessions open; finding the highest rate sustained") }
        var good = 0.0
        var bad = 0.0
        var rate = 1000.0
        while bad == 0 && rate < 1_000_000 {
            let run = load.run(rate: rate, seconds: 3)
            if !brief { print("  probe " + line("", run)) }
            if sustained(run) { good = rate; rate *= 1.5 } else { bad = rate }
        }
        for _ in 0..<3 where bad > 0 {
            let middle = (good + bad) / 2
            // The probe before overloaded the server, or this one's would measure
            // what that one left queued.
            sleep(2)
            let run = load.run(rate: middle, seconds: 3)
            if !brief { print("  probe " + line("", run)) }
            if sustained(run) { good = middle } else { bad = middle }
        }
        if brief { print(String(format: "max %.0f", good)) } else { print(String(format: "highest rate sustained: %.0f commands/s", good)) }
        if !brief { print("share target/s achieved/s p50-µs p99-µs p99.9-µs generator-lag-p99-µs") }
        for share in [25, 50, 75, 90] {
            // The last probe overloaded the server on purpose: what it left queued
            // (searches on the pool, lines not yet written) drains before a share is
            // measured, or its first commands wait behind it.
            sleep(2)
            let run = load.run(rate: good * Double(share) / 100, seconds: openLoopSeconds)
            print(line("\(share)", run))
        }
    }

    func connectStorm() {
        let result = ConnectStorm(port: port, clients: storm).run()
        func percentile(_ p: Double) -> Double {
            result.waits.isEmpty ? 0 : result.waits[min(result.waits.count - 1, Int(Double(result.waits.count) * p))] * 1000
        }
        if brief {
            print(
                String(
                    format: "%.0f %.0f %.0f %d %d %d", result.lastWelcome * 1000, percentile(0.5), percentile(0.99),
                    result.listenOverflows, result.synRetransmits, result.failed))
            return
        }
        print(
            String(
                format:
                    "%d clients at once: %d welcomed, last after %.0f ms (p50 %.0f ms, p99 %.0f ms); %d failed; kernel: %d listen-queue overflows, %d dropped, %d SYN retransmits",
                storm, result.welcomed, result.lastWelcome * 1000, percentile(0.5), percentile(0.99), result.failed,
                result.listenOverflows, result.listenDrops, result.synRetransmits))
    }

    static func connect(port: Int) -> Int32? {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let ok = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard ok == 0 else { close(fd); return nil }
        var one: Int32 = 1
        setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
        return fd
    }

    static func write(_ fd: Int32, _ bytes: [UInt8]) -> Bool {
        var offset = 0
        while offset < bytes.count {
            // MSG_NOSIGNAL: a server that closed the connection is a failed write, not a SIGPIPE.
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            if n <= 0 { return false }
            offset += n
        }
        return true
    }
}

/// Reads newline-terminated lines from a blocking socket.
struct LineReader {
    let fd: Int32
    var buffer = [UInt8](repeating: 0, count: 65536)
    var start = 0
    var end = 0

    init(fd: Int32) { self.fd = fd }

    /// Returns the length of the next line, or nil at end of stream.
    mutating func next() -> Int? {
        while true {
            if let newline = buffer[start..<end].firstIndex(of: 0x0A) {
                let length = newline - start
                start = newline + 1
                return length
            }
            if start > 0 {
                buffer.replaceSubrange(0..<(end - start), with: buffer[start..<end])
                end -= start
                start = 0
            }
            if end == buffer.count { buffer += [UInt8](repeating: 0, count: buffer.count) }
            let n = buffer[end...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return nil }
            end += n
        }
    }
}

/// Lines as text, for the scenarios that look inside them.
extension LineReader {
    mutating func nextLine() -> String? {
        guard let length = next() else { return nil }
        let begin = start - length - 1  // `next` left `start` just past the line's newline
        return String(decoding: buffer[begin..<(begin + length)], as: UTF8.self)
    }
}

extension ViewlineBench {
    /// Opens `idle` sessions, one `ping` each, and reports how much the server's
    /// resident memory grew per session, after one first session whose one-time cost
    /// (lazy globals, the first task's threads) is measured apart.
    func idleMemory() throws {
        guard serverPid > 0 else { throw ValidationError("--idle needs --server-pid") }
        var sockets: [(Int32, LineReader)] = []
        func open() throws {
            guard let fd = Self.connect(port: port) else { throw ValidationError("connection \(sockets.count + 1) failed") }
            var reader = LineReader(fd: fd)
            guard reader.next() != nil, Self.write(fd, Array("ping\n".utf8)), reader.next() != nil else {
                throw ValidationError("session \(sockets.count + 1) did not answer")
            }
            sockets.append((fd, reader))
        }
        // What the first session costs once (lazy globals, the first task's threads and
        // allocator) is not what each holds: it is measured apart, then the rest.
        let start = Self.residentKiB(serverPid)
        try open()
        usleep(300_000)
        let before = Self.residentKiB(serverPid)
        for _ in 0..<idle { try open() }
        usleep(500_000)
        let after = Self.residentKiB(serverPid)
        let perSession = Double(after - before) / Double(idle)
        if brief {
            print(String(format: "%.1f", perSession))
        } else {
            print(
                String(
                    format: "%d idle sessions: server RSS %d → %d KiB, %.1f KiB per session (the first one, once: %d KiB)", idle, before,
                    after, perSession, before - start))
        }
        for (fd, _) in sockets { close(fd) }
    }

    /// Opens `detached` sessions, 16 connections at a time (a million one after
    /// another would take most of an hour of round trips); each runs `command`, waits
    /// until its work settled, and hangs up, leaving its session detached on the
    /// server. Reports the server's RSS growth per session beside the encoded bytes of
    /// the states one session shows (what #75 lets a detached session hold over 1 KiB),
    /// then attaches to 1,000 of them at random (a fresh connection each) and times
    /// each `attach` to its reply.
    func detachedSessions() throws {
        guard serverPid > 0 else { throw ValidationError("--detached needs --server-pid") }
        let before = Self.residentKiB(serverPid)
        let opened = Mutex<(tokens: [String], failure: String?, viewBytes: Int)>(([], nil, 0))
        opened.withLock { $0.tokens.reserveCapacity(detached) }
        let lines = Array("\(command)\nwait 10000\n".utf8)
        let group = DispatchGroup()
        for worker in 0..<16 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var number = worker
                while number < detached, opened.withLock({ $0.failure == nil }) {
                    guard let fd = Self.connect(port: port) else {
                        opened.withLock { $0.failure = "connection \(number + 1) failed" }
                        return
                    }
                    var reader = LineReader(fd: fd)
                    guard let welcome = reader.nextLine(), let token = Self.field("token", in: welcome), Self.write(fd, lines) else {
                        close(fd)
                        opened.withLock { $0.failure = "session \(number + 1) did not start: is --max-sessions high enough?" }
                        return
                    }
                    var states: [String: Int] = [:]  // view → its state's encoded bytes, as last displayed
                    while let line = reader.nextLine(), !line.contains("\"settled\""), !line.contains("\"error\"") {
                        if number == 0, line.hasPrefix(#"{"type":"display""#), let view = Self.field("view", in: line),
                            let state = line.range(of: #""state":"#)
                        {
                            states[view] = line.utf8.distance(from: state.upperBound, to: line.utf8.endIndex) - 1
                        }
                    }
                    close(fd)
                    opened.withLock {
                        $0.tokens.append(token)
                        if number == 0 { $0.viewBytes = states.values.reduce(0, +) }
                    }
                    number += 16
                }
            }
        }
        group.wait()
        let (tokens, failure, viewBytes) = opened.withLock { ($0.tokens, $0.failure, $0.viewBytes) }
        if let failure { throw ValidationError(failure) }
        usleep(500_000)
        let after = Self.residentKiB(serverPid)
        var latencies: [Double] = []
        for _ in 0..<min(1000, tokens.count) {
            guard let fd = Self.connect(port: port) else { throw ValidationError("attach connection failed") }
            defer { close(fd) }
            var reader = LineReader(fd: fd)
            guard reader.nextLine() != nil else { throw ValidationError("no welcome") }
            let started = ContinuousClock.now
            guard Self.write(fd, Array("attach \(tokens.randomElement()!)\n".utf8)) else { throw ValidationError("attach failed") }
            while let line = reader.nextLine(), !line.hasPrefix(#"{"type":"reply""#) {}
            let elapsed = ContinuousClock.now - started
            latencies.append(Double(elapsed.components.attoseconds) / 1e12 + Double(elapsed.components.seconds) * 1e6)
        }
        latencies.sort()
        let p50 = latencies[latencies.count / 2], p99 = latencies[min(latencies.count - 1, latencies.count * 99 / 100)]
        let perSession = Double(after - before) / Double(detached)
        if brief {
            print(String(format: "%.2f %.0f %.0f %d %d", perSession, p50, p99, viewBytes, after))
        } else {
            print(
                String(
                    format:
                        "%d detached sessions after \"%@\": server RSS %d → %d KiB, %.2f KiB per session (the states each shows: %d bytes encoded); attach p50 %.0f µs, p99 %.0f µs",
                    detached, command, before, after, perSession, viewBytes, p50, p99))
        }
    }

    /// Opens `expiry` sessions as fast as 16 connections at a time allow (each runs
    /// `command`, settles and hangs up), so they expire in a burst; then, until the
    /// last has expired, one other session pings: the longest round trip and the
    /// 99.99th percentile are what a client saw while the server expired them all.
    /// Beside them, the same pings for 10 s before any session opened: what this
    /// machine's own jitter gives with nothing expiring (a longest ping is as much the
    /// VM's scheduling as the server's).
    func expiryPause() throws {
        guard expireAfter > 0, serverPid > 0 else { throw ValidationError("--expiry needs --expire-after and --server-pid") }
        guard let pinger = Self.connect(port: port) else { throw ValidationError("ping connection failed") }
        defer { close(pinger) }
        var pings = LineReader(fd: pinger)
        guard pings.nextLine() != nil else { throw ValidationError("no welcome") }
        func ping(until: ContinuousClock.Instant) throws -> [Duration] {
            var times: [Duration] = []
            while ContinuousClock.now < until {
                let sent = ContinuousClock.now
                guard Self.write(pinger, Array("ping\n".utf8)), pings.nextLine() != nil else { throw ValidationError("ping failed") }
                times.append(ContinuousClock.now - sent)
            }
            return times.sorted()
        }
        let baseline = try ping(until: .now + .seconds(10))
        let opened = Atomic<Int>(0)
        let lines = Array("\(command)\nwait 10000\n".utf8)
        let group = DispatchGroup()
        let started = ContinuousClock.now
        for worker in 0..<16 {
            group.enter()
            Thread.detachNewThread {
                defer { group.leave() }
                var number = worker
                while number < expiry {
                    guard let fd = Self.connect(port: port) else { return }
                    var reader = LineReader(fd: fd)
                    if reader.nextLine() != nil, Self.write(fd, lines) {
                        while let line = reader.nextLine(), !line.contains("\"settled\""), !line.contains("\"error\"") {}
                        opened.add(1, ordering: .relaxed)
                    }
                    close(fd)
                    number += 16
                }
            }
        }
        group.wait()
        let openedIn = ContinuousClock.now - started
        let peak = Self.residentKiB(serverPid)
        // The first sessions expire `expireAfter` after they detached; the last, that
        // long after the burst ended. Ping until then, and a little more.
        let times = try ping(until: started + openedIn + .milliseconds(Int(expireAfter * 1000)) + .seconds(3))
        let after = Self.residentKiB(serverPid)
        func ms(_ d: Duration?) -> Double {
            guard let d else { return 0 }
            return Double(d.components.attoseconds) / 1e15 + Double(d.components.seconds) * 1e3
        }
        func p9999(_ sorted: [Duration]) -> Double { ms(sorted.isEmpty ? nil : sorted[min(sorted.count - 1, sorted.count * 9999 / 10000)]) }
        if brief {
            print(String(format: "%.1f %.2f %.1f %.2f", ms(times.last), p9999(times), ms(baseline.last), p9999(baseline)))
        } else {
            print(
                String(
                    format:
                        "%d sessions opened in %.1f s and expired: longest of %d pings meanwhile %.1f ms, p99.99 %.2f ms (10 s before they opened: longest of %d %.1f ms, p99.99 %.2f ms); server RSS %d KiB at the peak, %d KiB after",
                    opened.load(ordering: .relaxed), Double(openedIn.components.seconds), times.count, ms(times.last), p9999(times),
                    baseline.count, ms(baseline.last), p9999(baseline), peak, after))
        }
    }

    /// A string field's value in a JSON line, without parsing the line.
    static func field(_ name: String, in line: String) -> String? {
        guard let range = line.range(of: "\"\(name)\":\"") else { return nil }
        let rest = line[range.upperBound...]
        return rest.firstIndex(of: "\"").map { String(rest[..<$0]) }
    }

    /// `fanout` sessions show the contacts view; the remote source changes and one
    /// `sync` runs: how long until every session displayed the change.
    func fanOut() throws {
        guard floor || !contactsFile.isEmpty else { throw ValidationError("--fanout needs --contacts-file") }
        if !floor { try #"[{"name":"Ada","phone":"1","address":"London"}]"#.write(toFile: contactsFile, atomically: true, encoding: .utf8) }
        var sessions: [(fd: Int32, reader: LineReader)] = []
        let showContacts = Array("contacts\nwait 60000\n".utf8)  // then asked again by any session refused
        let ports = [port] + otherPorts.split(separator: ",").compactMap { Int($0) }
        for number in 0..<fanout {
            guard let fd = Self.connect(port: ports[number % ports.count]) else { throw ValidationError("connection \(sessions.count + 1) failed") }
            var reader = LineReader(fd: fd)
            guard reader.next() != nil, Self.write(fd, showContacts) else { throw ValidationError("session failed") }
            sessions.append((fd, reader))
        }
        // Each has its contacts open and its sync settled: both replies (`contacts`,
        // then `wait`) succeeded. `unavailable` says try again (a node of a cluster
        // refuses commands while its session records lag, as they may while thousands
        // of sessions open): the sessions it refused ask again together, a moment
        // later, as clients would. Any other refusal (or a `wait` that timed out)
        // ends the run: never wait forever.
        var pending = Array(sessions.indices), retries = 0
        while !pending.isEmpty {
            var refused: [Int] = []
            for index in pending {
                var replies = 0, unavailable = false
                while replies < 2 {
                    guard let line = sessions[index].reader.nextLine() else {
                        throw ValidationError("session \(index + 1) hung up before its sync settled")
                    }
                    guard line.contains("\"type\":\"reply\"") else { continue }
                    replies += 1
                    guard line.contains("\"ok\":false") else { continue }
                    guard line.contains("\"unavailable\"") else { throw ValidationError("session \(index + 1) of \(fanout): \(line)") }
                    unavailable = true
                }
                if unavailable { refused.append(index) }
            }
            pending = refused
            guard !pending.isEmpty else { break }
            retries += pending.count
            guard retries <= 20 * fanout else { throw ValidationError("the sessions were refused \(retries) times; giving up") }
            usleep(200_000)
            for index in pending {
                guard Self.write(sessions[index].fd, showContacts) else { throw ValidationError("session failed") }
            }
        }
        if retries > 0 {  // on standard error: the figures' line stays one line
            FileHandle.standardError.write(Data("(\(retries) times a session was answered unavailable while they opened, and asked again)\n".utf8))
        }
        guard let trigger = Self.connect(port: port) else { throw ValidationError("trigger failed") }
        var triggerReader = LineReader(fd: trigger)
        _ = triggerReader.next()  // its welcome
        for change in 0..<fanoutChanges {
            let marker = "Grace\(change)x\(Int.random(in: 1000...9999))"
            if !floor {
                try #"[{"name":"Ada","phone":"1","address":"London"},{"name":"\#(marker)","phone":"2","address":"Arlington"}]"#
                    .write(toFile: contactsFile, atomically: true, encoding: .utf8)
            }
            let cpuBefore = serverPid > 0 ? Self.cpuSeconds(serverPid) : 0
            let start = DispatchTime.now().uptimeNanoseconds
            _ = Self.write(trigger, Array((floor ? "fanout \(marker)\n" : "sync\n").utf8))
            let bySocket = Self.timesBySocket(marker, on: sessions, since: start)
            let times = bySocket.values.sorted()
            // The server's CPU time from the trigger until the last session showed the
            // change (with --server-pid): what the fan-out cost it, whatever the generator did.
            let serverMs = serverPid > 0 ? (Self.cpuSeconds(serverPid) - cpuBefore) * 1000 : nil
            let p50 = times[times.count / 2], p99 = times[min(times.count - 1, times.count * 99 / 100)], max = times.last ?? 0
            if brief {
                print(String(format: "%.1f %.1f %.1f", p50, p99, max) + (serverMs.map { String(format: " %.0f", $0) } ?? ""))
            } else {
                print(
                    String(
                        format: (floor ? "floor: a display reaching %d connections" : "contacts change reaching %d sessions")
                            + ": p50 %.1f ms, p99 %.1f ms, max %.1f ms", fanout, p50, p99, max)
                        + (serverMs.map { String(format: "; server CPU %.0f ms (%.1f µs per display)", $0, $0 * 1000 / Double(fanout)) } ?? ""))
            }
            if !brief && ports.count > 1 {
                // Each node's own figures (sessions were opened on the ports in turn): where a
                // cluster's change is late, on the node that synced or on the one that heard.
                for (number, nodePort) in ports.enumerated() {
                    let mine = sessions.indices.filter { $0 % ports.count == number }.compactMap { bySocket[sessions[$0].fd] }.sorted()
                    guard !mine.isEmpty else { continue }
                    print(
                        String(
                            format: "  node on port %d: first %.1f ms, p50 %.1f ms, p99 %.1f ms, last %.1f ms", nodePort, mine[0],
                            mine[mine.count / 2], mine[min(mine.count - 1, mine.count * 99 / 100)], mine[mine.count - 1]))
                }
            }
            // The trigger's own replies and displays are read (not waited for), so its
            // output never backs up over many changes.
            var drain = [UInt8](repeating: 0, count: 65536)
            while drain.withUnsafeMutableBytes({ recv(trigger, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT)) }) > 0 {}
        }
        for session in sessions { close(session.fd) }
        close(trigger)
    }

    /// For each socket, milliseconds from `start` until a line holding `marker`
    /// arrived: one epoll set over all of them, each read as soon as it is readable.
    static func timesBySocket(_ marker: String, on sessions: [(fd: Int32, reader: LineReader)], since start: UInt64) -> [Int32: Double] {
        let needle = Array(marker.utf8)
        let epoll = epoll_create1(0)
        defer { close(epoll) }
        var received: [Int32: [UInt8]] = [:]
        var times: [Int32: Double] = [:]
        func arrived(_ fd: Int32) -> Bool {
            guard let bytes = received[fd], bytes.count >= needle.count else { return false }
            return bytes.withUnsafeBufferPointer { haystack in
                (0...(haystack.count - needle.count)).contains { offset in
                    haystack[offset] == needle[0] && Array(haystack[offset..<(offset + needle.count)]) == needle
                }
            }
        }
        for session in sessions {
            // Whatever the reader had already buffered counts as arrived before `start`.
            received[session.fd] = Array(session.reader.buffer[session.reader.start..<session.reader.end])
            if arrived(session.fd) { times[session.fd] = 0; received[session.fd] = nil; continue }
            _ = fcntl(session.fd, F_SETFL, fcntl(session.fd, F_GETFL) | O_NONBLOCK)
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: session.fd))
            epoll_ctl(epoll, EPOLL_CTL_ADD, session.fd, &event)
        }
        var events = [epoll_event](repeating: epoll_event(), count: 512)
        var buffer = [UInt8](repeating: 0, count: 65536)
        let deadline = start + 60_000_000_000
        while !received.isEmpty && DispatchTime.now().uptimeNanoseconds < deadline {
            let ready = epoll_wait(epoll, &events, Int32(events.count), 100)
            for index in 0..<Int(max(ready, 0)) {
                let fd = events[index].data.fd
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                guard count > 0 else { continue }
                received[fd, default: []].append(contentsOf: buffer[0..<count])
                if arrived(fd) {
                    times[fd] = Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000
                    received[fd] = nil
                    var none = epoll_event()
                    epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &none)
                }
            }
        }
        // A session that never showed the change counts as the whole wait.
        let whole = Double(DispatchTime.now().uptimeNanoseconds - start) / 1_000_000
        for fd in received.keys { times[fd] = whole }
        return times
    }

    /// User + system CPU time of `pid` in seconds, from /proc/PID/stat (fields 14, 15).
    static func cpuSeconds(_ pid: Int) -> Double {
        guard let stat = try? String(contentsOfFile: "/proc/\(pid)/stat", encoding: .utf8),
            let close = stat.lastIndex(of: ")")
        else { return 0 }
        // After "pid (comm)": state is field 3, so utime and stime are 12th and 13th here.
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        guard fields.count > 12, let user = Double(fields[11]), let system = Double(fields[12]) else { return 0 }
        return (user + system) / Double(sysconf(Int32(_SC_CLK_TCK)))
    }

    /// VmRSS of `pid` in KiB, from /proc.
    static func residentKiB(_ pid: Int) -> Int {
        guard let status = try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8),
            let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmRSS:") })
        else { return 0 }
        return Int(line.split(separator: " ").dropFirst().first ?? "0") ?? 0
    }
}
