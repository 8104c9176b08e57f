import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The reconnect-storm scenario: `clients` connections opened at once (every
/// `connect` issued before any welcome is read, as after a failover), each waiting
/// for its welcome line. Reports when the last welcome came, each client's time to
/// its welcome (p50, p99) and what the kernel did meanwhile: connections refused or
/// dropped because the listen backlog was full, and SYNs sent again (a dropped SYN is
/// retried a second later, which is the stall a backlog too small shows).
struct ConnectStorm {
    let port: Int
    let clients: Int

    struct Result {
        var welcomed = 0
        var failed = 0
        var lastWelcome: Double = 0
        var waits: [Double] = []  // seconds from the start to each welcome
        var listenOverflows = 0
        var listenDrops = 0
        var synRetransmits = 0
    }

    /// TcpExt counters from /proc/net/netstat (this host's, so loopback's both sides).
    static func tcpExtended() -> [String: Int] {
        guard let text = try? String(contentsOfFile: "/proc/net/netstat", encoding: .utf8) else { return [:] }
        let lines = text.split(separator: "\n").filter { $0.hasPrefix("TcpExt:") }
        guard lines.count == 2 else { return [:] }
        let names = lines[0].split(separator: " ").dropFirst()
        let values = lines[1].split(separator: " ").dropFirst()
        return Dictionary(zip(names.map(String.init), values.map { Int($0) ?? 0 }), uniquingKeysWith: { first, _ in first })
    }

    func run() -> Result {
        var result = Result()
        let before = Self.tcpExtended()
        let epoll = epoll_create1(0)
        defer { close(epoll) }
        var waiting = Set<Int32>()
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        let start = DispatchTime.now().uptimeNanoseconds
        for _ in 0..<clients {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue), 0)
            guard fd >= 0 else { result.failed += 1; continue }
            let status = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            guard status == 0 || errno == EINPROGRESS else { close(fd); result.failed += 1; continue }
            var event = epoll_event(events: EPOLLIN.rawValue | EPOLLRDHUP.rawValue, data: epoll_data_t(fd: fd))
            epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
            waiting.insert(fd)
        }
        var welcomed: [Int32] = []
        var events = [epoll_event](repeating: epoll_event(), count: 1024)
        var buffer = [UInt8](repeating: 0, count: 4096)
        let deadline = start + 30_000_000_000
        while !waiting.isEmpty, DispatchTime.now().uptimeNanoseconds < deadline {
            let ready = epoll_wait(epoll, &events, Int32(events.count), 100)
            guard ready > 0 else { continue }
            for index in 0..<Int(ready) {
                let fd = events[index].data.fd
                guard waiting.contains(fd) else { continue }
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count < 0, errno == EAGAIN { continue }
                var none = epoll_event()
                epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &none)
                waiting.remove(fd)
                // The welcome is one short line: its first read holds its newline.
                if count > 0, buffer[..<count].contains(UInt8(ascii: "\n")) {
                    let wait = Double(DispatchTime.now().uptimeNanoseconds - start) / 1e9
                    result.waits.append(wait)
                    result.lastWelcome = max(result.lastWelcome, wait)
                    result.welcomed += 1
                    welcomed.append(fd)
                } else {
                    result.failed += 1
                    close(fd)
                }
            }
        }
        result.failed += waiting.count
        for fd in waiting { close(fd) }
        for fd in welcomed { close(fd) }
        let after = Self.tcpExtended()
        func delta(_ name: String) -> Int { (after[name] ?? 0) - (before[name] ?? 0) }
        result.listenOverflows = delta("ListenOverflows")
        result.listenDrops = delta("ListenDrops")
        result.synRetransmits = delta("TCPSynRetrans")
        result.waits.sort()
        return result
    }
}
