import Foundation
import ViewlineProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// A raw TCP client for end-to-end tests: sends bytes, reads JSON lines with timeouts.
public final class LineClient {
    public let fd: Int32
    private var buffer: [UInt8] = []
    /// Every message received, in order.
    public private(set) var received: [JSON] = []
    private var unread: [JSON] = []

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// Connects to `host:port`; with `source`, from that local address (any of
    /// 127.0.0.0/8 works on loopback: a test's stand-in for another client host); with
    /// `receiveBuffer`, a kernel receive buffer that small (a client that reads little).
    public init(port: Int, host: String = "127.0.0.1", from source: String? = nil, receiveBuffer: Int32? = nil) throws {
        _ = BrokenPipes.ignored
        // `self.fd` is set last: a class whose initializer throws once every stored
        // property is set runs its `deinit`, which would close the descriptor a second
        // time — by then perhaps another thread's (a server's output pipe, read as an
        // eventfd: EINVAL, and Foundation's `try!` ended the whole test process).
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        if var size = receiveBuffer {
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        if let source, Self.withAddress(source, port: 0, { bind(fd, $0, $1) }) != 0 {
            close(fd)
            throw Failure(description: "bind to \(source) failed: \(String(cString: strerror(errno)))")
        }
        guard Self.withAddress(host, port: port, { connect(fd, $0, $1) }) == 0 else {
            close(fd)
            throw Failure(description: "connect to \(port) failed: \(String(cString: strerror(errno)))")
        }
        self.fd = fd
    }

    /// Calls `body` with the IPv4 socket address of `host:port`.
    private static func withAddress(_ host: String, port: Int, _ body: (UnsafePointer<sockaddr>, socklen_t) -> Int32) -> Int32 {
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        return withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
    }

    deinit { close(fd) }

    /// Sends every byte of `bytes`; throws once the peer has closed. (`MSG_NOSIGNAL`:
    /// a write to a connection the server closed is an error here, not a `SIGPIPE`
    /// that ends the whole test process.)
    public func sendRaw(_ bytes: [UInt8]) throws {
        var offset = 0
        while offset < bytes.count {
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
            guard n > 0 else { throw Failure(description: "write failed: \(String(cString: strerror(errno)))") }
            offset += n
        }
    }

    /// Sends as much of `bytes` as the peer takes within `timeout` (a server that stops
    /// reading fills the socket's buffers); returns how many bytes went, or -1 once the
    /// peer has closed.
    public func send(_ bytes: [UInt8], within timeout: Duration) -> Int {
        let deadline = ContinuousClock.now + timeout
        var offset = 0
        while offset < bytes.count {
            let left = deadline - ContinuousClock.now
            guard left > .zero else { break }
            var descriptor = pollfd(fd: fd, events: Int16(POLLOUT), revents: 0)
            let milliseconds = Int32(left.components.seconds * 1000 + left.components.attoseconds / 1_000_000_000_000_000)
            guard poll(&descriptor, 1, max(1, milliseconds)) > 0 else { continue }
            if descriptor.revents & Int16(POLLERR | POLLHUP) != 0 { return -1 }
            let n = bytes[offset...].withUnsafeBytes { Glibc.send(fd, $0.baseAddress, $0.count, Int32(MSG_DONTWAIT) | Int32(MSG_NOSIGNAL)) }
            if n < 0 {
                if errno == EAGAIN || errno == EWOULDBLOCK { continue }
                return -1
            }
            offset += n
        }
        return offset
    }

    /// Closes the sending side only, as `nc -N` does at the end of its input.
    public func shutdownWrite() { shutdown(fd, Int32(SHUT_WR)) }

    /// Sends one line with `\n`.
    public func send(_ line: String) throws { try sendRaw(Array(line.utf8) + [0x0A]) }

    /// The next message, or an error after `timeout`.
    public func next(timeout: Duration = .seconds(5)) throws -> JSON {
        if !unread.isEmpty { return unread.removeFirst() }
        guard let line = try readLine(timeout: timeout) else { throw Failure(description: "connection closed; got \(received.map(\.encoded))") }
        let message = try JSON.parse(line)
        received.append(message)
        return message
    }

    /// Whether the server closed the connection within `timeout`.
    public func isClosedByPeer(timeout: Duration = .seconds(5)) throws -> Bool {
        while true {
            guard let line = try readLine(timeout: timeout) else { return true }
            received.append(try JSON.parse(line))
        }
    }

    /// Whether the server closed the connection within `timeout`, whatever it sent
    /// before (read and dropped); `false` when it is still open then.
    public func isClosed(within timeout: Duration) -> Bool {
        let deadline = ContinuousClock.now + timeout
        while true {
            buffer.removeAll(keepingCapacity: true)
            guard ContinuousClock.now < deadline else { return false }
            do {
                guard try fill(until: deadline) else { return true }
            } catch {
                return false  // timed out: still open
            }
        }
    }

    /// Reads one raw line; `nil` at end of stream.
    public func readLine(timeout: Duration) throws -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        while true {
            if let newline = buffer.firstIndex(of: 0x0A) {
                let line = Array(buffer[..<newline])
                buffer.removeSubrange(...newline)
                return line
            }
            guard try fill(until: deadline) else { return nil }
        }
    }

    /// Reads exactly `count` raw bytes (a WebSocket frame's parts); `nil` at end of stream.
    public func readBytes(_ count: Int, timeout: Duration) throws -> [UInt8]? {
        let deadline = ContinuousClock.now + timeout
        while buffer.count < count {
            guard try fill(until: deadline) else { return nil }
        }
        defer { buffer.removeFirst(count) }
        return Array(buffer.prefix(count))
    }

    /// Appends what the socket has to the buffer; `false` at end of stream.
    private func fill(until deadline: ContinuousClock.Instant) throws -> Bool {
        while true {
            let remaining = deadline - ContinuousClock.now
            guard remaining > .zero else { throw Failure(description: "timed out; got \(received.map(\.encoded))") }
            var pfd = pollfd(fd: fd, events: Int16(POLLIN), revents: 0)
            let ms = Int32(remaining.components.seconds * 1000 + remaining.components.attoseconds / 1_000_000_000_000_000)
            let ready = poll(&pfd, 1, max(1, ms))
            if ready < 0 && errno == EINTR { continue }
            if ready <= 0 { continue }
            var chunk = [UInt8](repeating: 0, count: 65536)
            let n = chunk.withUnsafeMutableBytes { Glibc.read(fd, $0.baseAddress, $0.count) }
            if n <= 0 { return false }
            buffer.append(contentsOf: chunk[..<n])
            return true
        }
    }
}

/// A test client of the protocol over any transport: lines out, messages in.
public protocol ProtocolClient: AnyObject {
    /// Sends one protocol line.
    func send(_ line: String) throws
    /// The next message, or an error after `timeout`.
    func next(timeout: Duration) throws -> JSON
}

extension ProtocolClient {
    /// Reads until a message satisfies `predicate`; returns everything read on the way, it included.
    @discardableResult
    public func read(until predicate: (JSON) -> Bool, timeout: Duration = .seconds(5)) throws -> [JSON] {
        var seen: [JSON] = []
        while true {
            let message = try next(timeout: timeout)
            seen.append(message)
            if predicate(message) { return seen }
        }
    }

    /// Sends a command and returns its reply (events on the way are kept in `received`);
    /// throws when no message comes within `timeout`.
    @discardableResult
    public func command(_ line: String, timeout: Duration = .seconds(5)) throws -> JSON {
        try send(line)
        return try read(until: { $0["type"] == "reply" }, timeout: timeout).last!
    }
}

extension LineClient: ProtocolClient {}
