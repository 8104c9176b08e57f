import NIOCore
import NIOHTTP1

/// Writes one whole HTTP response: the web listener's and the operations
/// listener's (same plumbing). Keeps the connection open only after a success the
/// client asked to keep alive.
enum HTTPReply {
    static func send(
        _ status: HTTPResponseStatus, _ body: ByteBuffer, type: String, to head: HTTPRequestHead, context: ChannelHandlerContext,
        headers extra: [(String, String)] = []
    ) {
        var headers = HTTPHeaders(extra)
        headers.add(name: "Content-Type", value: type)
        headers.add(name: "Content-Length", value: "\(body.readableBytes)")
        if !extra.contains(where: { $0.0 == "Cache-Control" }) { headers.add(name: "Cache-Control", value: "no-store") }
        let keepAlive = head.isKeepAlive && (status == .ok || status == .noContent)
        if !keepAlive { headers.add(name: "Connection", value: "close") }
        context.write(NIOAny(HTTPServerResponsePart.head(HTTPResponseHead(version: head.version, status: status, headers: headers))), promise: nil)
        if head.method != .HEAD { context.write(NIOAny(HTTPServerResponsePart.body(.byteBuffer(body))), promise: nil) }
        let done = context.writeAndFlush(NIOAny(HTTPServerResponsePart.end(nil)))
        if !keepAlive { done.whenComplete { _ in context.close(promise: nil) } }
    }
}

/// A request's head, handed over once its end arrived: what both HTTP listeners
/// answer (neither takes a body; one is read and dropped).
struct HTTPRequestAssembly {
    private var head: HTTPRequestHead?

    /// The finished request's head at its `.end`; `nil` until then.
    mutating func complete(with part: HTTPServerRequestPart) -> HTTPRequestHead? {
        switch part {
        case .head(let head):
            self.head = head
            return nil
        case .body:
            return nil
        case .end:
            defer { head = nil }
            return head
        }
    }
}
