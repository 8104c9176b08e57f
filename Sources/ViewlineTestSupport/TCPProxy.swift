import Foundation
import Synchronization

#if canImport(Glibc)
    import Glibc
#endif

/// A loopback TCP proxy a test can cut, as a dropped Wi-Fi would: every connection
/// through it is forwarded to `target` until ``cut()`` closes them all, or
/// ``silence()`` stops forwarding on them without closing them, as a link that goes
/// quiet does (new connections keep working either way); ``down()`` refuses new ones
/// too, as a stopped database does, until ``up()``.
public final class TCPProxy: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let open = Mutex<[Int32]>([])
    /// Connections accepted before this number of them are silenced.
    private let silencedBelow = Atomic<Int>(0)
    private let accepted = Atomic<Int>(0)
    /// While set, the target is down: new connections are closed at once.
    private let refusing = Atomic<Bool>(false)
    /// How long each piece waits before it is forwarded, each way (milliseconds).
    private let delayMilliseconds = Atomic<Int>(0)
    /// Bytes that, once forwarded from the target, cut every connection (``cut(afterTheTargetSends:)``).
    private let cutMarker = Mutex<[UInt8]?>(nil)

    public init(to target: Int) throws {
        _ = BrokenPipes.ignored
        self.target = target
        let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        self.listener = listener
        var yes: Int32 = 1
        setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &yes, socklen_t(MemoryLayout<Int32>.size))
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = 0
        inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer -> Int32 in
                guard bind(listener, pointer, length) == 0, listen(listener, 16) == 0 else { return -1 }
                return getsockname(listener, pointer, &length)
            }
        }
        guard bound == 0 else { throw LineClient.Failure(description: "proxy cannot listen") }
        port = Int(UInt16(bigEndian: address.sin_port))
        Thread.detachNewThread { [self] in acceptLoop() }
    }

    deinit { shutdown(listener, Int32(SHUT_RDWR)); close(listener) }

    /// Drops every connection through the proxy.
    public func cut() {
        for fd in open.withLock({ fds in
            defer { fds = [] }; return fds
        }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    /// Drops every connection right after the target sends `marker` (forwarded first),
    /// at most once: a cut at a point of the exchange, decided on the proxy's own
    /// thread, so it lands there however late the test's task runs.
    public func cut(afterTheTargetSends marker: String) {
        cutMarker.withLock { $0 = Array(marker.utf8) }
    }

    /// Whether `piece`, after `carried` (the end of what came before it), holds the
    /// armed marker; if so the marker is disarmed. `carried` keeps what a marker split
    /// across pieces needs.
    private func takeMarker(in piece: ArraySlice<UInt8>, after carried: inout [UInt8]) -> Bool {
        cutMarker.withLock { marker in
            guard let armed = marker, !armed.isEmpty else { return false }
            let seen = carried + piece
            carried = Array(seen.suffix(armed.count - 1))
            guard seen.count >= armed.count,
                (0...(seen.count - armed.count)).contains(where: { seen[$0..<($0 + armed.count)].elementsEqual(armed) })
            else { return false }
            marker = nil
            return true
        }
    }

    /// The target goes down: new connections are closed at once, until ``up()``, and
    /// the open ones are dropped (or, with `cuttingOpen: false`, left as they are: after
    /// ``silence()``, a database that went quiet and takes no one new).
    public func down(cuttingOpen: Bool = true) {
        refusing.store(true, ordering: .releasing)
        if cuttingOpen { cut() }
    }

    /// Every piece forwarded from now on waits `delay` first, each way: a slow link
    /// (a round trip takes twice `delay` at least). `.zero` restores it.
    public func slow(_ delay: Duration) {
        delayMilliseconds.store(Int(delay / .milliseconds(1)), ordering: .releasing)
    }

    /// The target is back: new connections are forwarded again.
    public func up() {
        refusing.store(false, ordering: .releasing)
    }

    /// Every connection open now goes silent: what either side sends is read and
    /// dropped, and neither side hears that anything happened.
    public func silence() {
        silencedBelow.store(accepted.load(ordering: .acquiring), ordering: .releasing)
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            if refusing.load(ordering: .acquiring) {
                close(client)
                continue
            }
            guard let upstream = try? LineClient(port: target) else { close(client); continue }
            let server = dup(upstream.fd)
            open.withLock { $0 += [client, server] }
            let number = accepted.add(1, ordering: .acquiringAndReleasing).oldValue
            let silent: @Sendable () -> Bool = { [self] in number < silencedBelow.load(ordering: .acquiring) }
            let delay: @Sendable () -> Int = { [self] in delayMilliseconds.load(ordering: .acquiring) }
            Thread.detachNewThread { Self.pump(from: client, to: server, silent: silent, delay: delay) }
            Thread.detachNewThread { [self] in
                var carried: [UInt8] = []
                Self.pump(from: server, to: client, silent: silent, delay: delay) { piece in
                    if takeMarker(in: piece, after: &carried) { cut() }
                }
            }
        }
    }

    private static func pump(
        from source: Int32, to destination: Int32, silent: @Sendable () -> Bool, delay: @Sendable () -> Int,
        forwarded: (ArraySlice<UInt8>) -> Void = { _ in }
    ) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            if silent() { continue }
            let wait = delay()
            if wait > 0 { usleep(useconds_t(wait * 1000)) }
            // MSG_NOSIGNAL: a side that closed ends this pump, not (by SIGPIPE) the test process.
            guard buffer.withUnsafeBytes({ send(destination, $0.baseAddress, count, Int32(MSG_NOSIGNAL)) }) == count else { break }
            forwarded(buffer[..<count])
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
    }
}
