import CEpoll
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// The load generator for the command-rate scenarios: one thread, one `epoll`
/// set, every connection non-blocking. Each connection keeps `depth` commands in
/// flight: it sends a batch of `depth` lines, and when the batch's last reply
/// arrives it records the batch's round trip and sends the next. The same code
/// drives viewline-server and redis-server, so neither pays for the generator
/// more than the other (a thread per connection cost more than the servers did).
struct EpollLoad {
    struct Result {
        var commands = 0
        /// Batch round trips, µs (at most `maximumSamples`).
        var latencies: [Double] = []
        var failedConnections = 0
    }

    let port: Int
    let connections: Int
    let depth: Int
    let line: [UInt8]
    /// Whether each connection first reads a welcome line (viewline) or not (redis).
    /// With a welcome, only reply lines count (a command's events are not replies).
    let welcome: Bool
    /// A line each connection sends first, waiting for its reply (`login …`).
    var setup: String? = nil
    /// Speak WebSocket (`--web-port`'s `/ws`): one masked text frame per command,
    /// replies counted per frame, instead of lines.
    var websocket = false
    let seconds: Double
    static let maximumSamples = 1_000_000

    private final class Connection {
        let fd: Int32
        var pending = 0
        var sentAt: UInt64 = 0
        /// Where the reply lines are in what it reads.
        var replies = ReplyLines()
        /// Bytes since the last newline, and whether this message is a reply (WebSocket).
        var column = 0
        var isReply = false
        /// WebSocket framing: header bytes still expected, payload bytes left.
        var header: [UInt8] = []
        var payloadLeft = 0
        init(fd: Int32) { self.fd = fd }
    }

    /// Counts the reply messages in `bytes` of a WebSocket stream (frames may
    /// straddle reads): a text frame whose payload has `r` at column 9.
    private static func countFrames(_ bytes: UnsafeRawBufferPointer, _ connection: Connection) -> Int {
        var replies = 0
        var index = 0
        while index < bytes.count {
            if connection.payloadLeft > 0 {
                let take = min(connection.payloadLeft, bytes.count - index)
                if connection.column <= 9, connection.column + take > 9 {
                    connection.isReply = bytes[index + 9 - connection.column] == UInt8(ascii: "r")
                }
                connection.column += take
                connection.payloadLeft -= take
                index += take
                if connection.payloadLeft == 0 {
                    if connection.isReply { replies += 1 }
                    connection.column = 0
                    connection.isReply = false
                }
                continue
            }
            connection.header.append(bytes[index])
            index += 1
            let header = connection.header
            guard header.count >= 2 else { continue }
            let short = Int(header[1] & 0x7F)
            let needed = short == 126 ? 4 : short == 127 ? 10 : 2
            guard header.count == needed else { continue }
            let length =
                short == 126
                ? Int(header[2]) << 8 | Int(header[3])
                : short == 127 ? header[2..<10].reduce(0) { $0 << 8 | Int($1) } : short
            connection.header.removeAll(keepingCapacity: true)
            connection.payloadLeft = length
            connection.column = 0
            connection.isReply = false
        }
        return replies
    }

    /// A masked client text frame carrying `line` (without its newline).
    static func frame(_ line: [UInt8]) -> [UInt8] {
        let payload = line.last == 0x0A ? Array(line.dropLast()) : line
        precondition(payload.count < 126, "bench commands are short")
        let mask: [UInt8] = [0x37, 0xFA, 0x21, 0x3D]
        return [0x81, 0x80 | UInt8(payload.count)] + mask + payload.enumerated().map { $0.element ^ mask[$0.offset % 4] }
    }

    /// The upgrade to WebSocket on `fd`, blocking; then the welcome message.
    static func upgrade(_ fd: Int32, port: Int) -> Bool {
        let request =
            "GET /ws HTTP/1.1\r\nHost: 127.0.0.1:\(port)\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            + "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"
        guard ViewlineBench.write(fd, Array(request.utf8)) else { return false }
        // The 101 response, then the welcome frame: read until both are in.
        var received: [UInt8] = []
        var byte: UInt8 = 0
        while !received.suffix(4).elementsEqual([13, 10, 13, 10]) {
            guard read(fd, &byte, 1) == 1 else { return false }
            received.append(byte)
        }
        guard String(decoding: received.prefix(12), as: UTF8.self) == "HTTP/1.1 101" else { return false }
        var head = [UInt8](repeating: 0, count: 2)
        guard read(fd, &head, 2) == 2 else { return false }
        var length = Int(head[1] & 0x7F)
        if length == 126 {
            var extended = [UInt8](repeating: 0, count: 2)
            guard read(fd, &extended, 2) == 2 else { return false }
            length = Int(extended[0]) << 8 | Int(extended[1])
        }
        var payload = [UInt8](repeating: 0, count: length)
        var got = 0
        while got < length {
            let n = payload[got...].withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            guard n > 0 else { return false }
            got += n
        }
        return true
    }

    func run() -> Result {
        var result = Result()
        let epoll = epoll_create1(0)
        defer { close(epoll) }
        var open: [Int32: Connection] = [:]
        let unit = websocket ? Self.frame(line) : line
        let batch = Array([[UInt8]](repeating: unit, count: depth).joined())
        for _ in 0..<connections {
            guard let fd = ViewlineBench.connect(port: port) else { result.failedConnections += 1; continue }
            if websocket {
                guard Self.upgrade(fd, port: port) else { close(fd); result.failedConnections += 1; continue }
            } else if welcome {
                var reader = LineReader(fd: fd)
                guard reader.next() != nil else { close(fd); result.failedConnections += 1; continue }
                if let setup {
                    guard ViewlineBench.write(fd, Array((setup + "\n").utf8)) else { close(fd); result.failedConnections += 1; continue }
                    while let line = reader.nextLine(), !line.hasPrefix(#"{"type":"reply""#) {}
                }
            }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var event = epoll_event(events: EPOLLIN.rawValue, data: epoll_data_t(fd: fd))
            epoll_ctl(epoll, EPOLL_CTL_ADD, fd, &event)
            open[fd] = Connection(fd: fd)
        }
        defer { for fd in open.keys { close(fd) } }
        func send(_ connection: Connection) -> Bool {
            connection.sentAt = DispatchTime.now().uptimeNanoseconds
            connection.pending = depth
            // A batch is at most depth × a short line: the socket buffer takes it whole.
            return batch.withUnsafeBytes { Glibc.send(connection.fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) } == batch.count
        }
        for connection in open.values where !send(connection) {
            result.failedConnections += 1
        }
        let deadline = DispatchTime.now().uptimeNanoseconds + UInt64(seconds * 1e9)
        var events = [epoll_event](repeating: epoll_event(), count: 256)
        var buffer = [UInt8](repeating: 0, count: 65536)
        result.latencies.reserveCapacity(min(Self.maximumSamples, 200_000))
        while DispatchTime.now().uptimeNanoseconds < deadline {
            let ready = epoll_wait(epoll, &events, Int32(events.count), 50)
            guard ready > 0 else { continue }
            for index in 0..<Int(ready) {
                let fd = events[index].data.fd
                guard let connection = open[fd] else { continue }
                let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
                if count <= 0 {
                    if count < 0 && errno == EAGAIN { continue }
                    result.failedConnections += 1
                    var none = epoll_event()
                    epoll_ctl(epoll, EPOLL_CTL_DEL, fd, &none)
                    close(fd)
                    open[fd] = nil
                    continue
                }
                var lines = 0
                buffer.withUnsafeBytes { bytes in
                    if websocket {
                        lines = Self.countFrames(UnsafeRawBufferPointer(rebasing: bytes[0..<count]), connection)
                        return
                    }
                    if !welcome {
                        for byte in bytes[0..<count] where byte == 0x0A { lines += 1 }
                        return
                    }
                    lines = connection.replies.count(in: UnsafeRawBufferPointer(rebasing: bytes[0..<count]))
                }
                connection.pending -= lines
                result.commands += lines
                if connection.pending <= 0 {
                    if result.latencies.count < Self.maximumSamples {
                        result.latencies.append(Double(DispatchTime.now().uptimeNanoseconds - connection.sentAt) / 1000)
                    }
                    if !send(connection) { result.failedConnections += 1 }
                }
            }
        }
        return result
    }
}

/// Counts the reply lines in a stream of a server's lines read in pieces: in
/// `{"type":"reply"…` the byte at column 9 tells a reply from an event.
struct ReplyLines {
    private var column = 0
    private var isReply = false

    /// The replies that end in `bytes`.
    mutating func count(in bytes: UnsafeRawBufferPointer) -> Int {
        var replies = 0
        for byte in bytes {
            if byte == 0x0A {
                if isReply { replies += 1 }
                column = 0
                isReply = false
            } else {
                if column == 9 { isReply = byte == UInt8(ascii: "r") }
                column += 1
            }
        }
        return replies
    }
}
