import Foundation
import Synchronization

#if canImport(Glibc)
import Glibc
#endif

/// A loopback TCP proxy a test can cut, as a dropped Wi-Fi would: every connection
/// through it is forwarded to `target` until ``cut()`` closes them all (new
/// connections keep working).
public final class TCPProxy: @unchecked Sendable {
    public let port: Int
    private let listener: Int32
    private let target: Int
    private let open = Mutex<[Int32]>([])

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
        for fd in open.withLock({ fds in defer { fds = [] }; return fds }) { shutdown(fd, Int32(SHUT_RDWR)) }
    }

    private func acceptLoop() {
        while true {
            let client = accept(listener, nil, nil)
            guard client >= 0 else { return }
            guard let upstream = try? LineClient(port: target) else { close(client); continue }
            let server = dup(upstream.fd)
            open.withLock { $0 += [client, server] }
            Thread.detachNewThread { Self.pump(from: client, to: server) }
            Thread.detachNewThread { Self.pump(from: server, to: client) }
        }
    }

    private static func pump(from source: Int32, to destination: Int32) {
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(source, $0.baseAddress, $0.count) }
            guard count > 0 else { break }
            // MSG_NOSIGNAL: a side that closed ends this pump, not (by SIGPIPE) the test process.
            guard buffer.withUnsafeBytes({ send(destination, $0.baseAddress, count, Int32(MSG_NOSIGNAL)) }) == count else { break }
        }
        shutdown(source, Int32(SHUT_RDWR))
        shutdown(destination, Int32(SHUT_RDWR))
    }
}
