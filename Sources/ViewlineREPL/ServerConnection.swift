#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import CTLSClient
import ViewlineProtocol

/// A blocking TCP (or TLS) connection to the server, read line by line.
///
/// The REPL polls its file descriptor together with standard input (inside
/// libedit's read function), so no event loop of its own is needed.
public final class ServerConnection {
    public let fd: Int32
    private var buffer: [UInt8] = []
    public private(set) var closed = false
    private var tls: OpaquePointer?

    /// How to secure the connection: TLS, verifying the server against `caFile`
    /// (a PEM file) or, without one, the system's trusted certificates.
    public struct TLS: Sendable {
        public var caFile: String?
        public init(caFile: String? = nil) { self.caFile = caFile }
    }

    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    public convenience init(host: String, port: Int, tls: TLS?) throws {
        try self.init(host: host, port: port)
        guard let tls else { return }
        var error = [CChar](repeating: 0, count: 512)
        guard let session = vl_tls_connect(fd, host, tls.caFile, &error, error.count) else {
            let message = String(decoding: error.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
            throw Failure(description: "cannot connect to \(host):\(port) over TLS: \(message)")
        }
        self.tls = session
    }

    public init(host: String, port: Int) throws {
        var hints = addrinfo()
        hints.ai_family = AF_UNSPEC
        #if canImport(Glibc)
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        #else
        hints.ai_socktype = SOCK_STREAM
        #endif
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(host, String(port), &hints, &list)
        guard status == 0, let first = list else {
            throw Failure(description: "cannot resolve \(host): \(String(cString: gai_strerror(status)))")
        }
        defer { freeaddrinfo(list) }
        var lastError: Int32 = 0
        var cursor: UnsafeMutablePointer<addrinfo>? = first
        while let info = cursor {
            let candidate = socket(info.pointee.ai_family, info.pointee.ai_socktype, info.pointee.ai_protocol)
            if candidate >= 0 {
                if connect(candidate, info.pointee.ai_addr, info.pointee.ai_addrlen) == 0 {
                    var one: Int32 = 1
                    setsockopt(candidate, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
                    fd = candidate
                    return
                }
                lastError = errno
                close(candidate)
            } else {
                lastError = errno
            }
            cursor = info.pointee.ai_next
        }
        throw Failure(description: "cannot connect to \(host):\(port): \(String(cString: strerror(lastError)))")
    }

    deinit {
        if let tls { vl_tls_close(tls) }
        if !closed { close(fd) }
    }

    /// Sends one line (a newline is appended).
    public func send(_ line: String) throws {
        var bytes = Array(line.utf8)
        bytes.append(0x0A)
        if let tls {
            guard vl_tls_write(tls, bytes, bytes.count) == 0 else { throw Failure(description: "connection lost") }
            return
        }
        var offset = 0
        while offset < bytes.count {
            let written = bytes[offset...].withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if written < 0 {
                if errno == EINTR { continue }
                throw Failure(description: "connection lost: \(String(cString: strerror(errno)))")
            }
            offset += written
        }
    }

    /// A complete line already buffered, if any.
    public func bufferedLine() -> String? {
        guard let newline = buffer.firstIndex(of: 0x0A) else { return nil }
        let line = String(decoding: buffer[..<newline], as: UTF8.self)
        buffer.removeSubrange(...newline)
        return line
    }

    /// Reads what is available (call when poll says readable). Returns false at end of stream.
    public func fill() -> Bool {
        var chunk = [UInt8](repeating: 0, count: 65536)
        if let tls {
            // One record, then whatever of it is already decrypted: poll() cannot see that.
            repeat {
                let count = chunk.withUnsafeMutableBytes { vl_tls_read(tls, $0.baseAddress, $0.count) }
                guard count > 0 else {
                    closed = true
                    return false
                }
                buffer.append(contentsOf: chunk[..<Int(count)])
            } while vl_tls_pending(tls) > 0
            return true
        }
        while true {
            let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 {
                buffer.append(contentsOf: chunk[..<count])
                return true
            }
            if count < 0 && errno == EINTR { continue }
            closed = true
            return false
        }
    }

    /// Blocks until a line arrives; `nil` when the server closed the connection.
    public func readLine() -> String? {
        while true {
            if let line = bufferedLine() { return line }
            if closed || !fill() { return nil }
        }
    }
}
