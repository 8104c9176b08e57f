import Logging
import NIOCore
import NIOHTTP1

/// What an HTTP connection may have read ahead of the request being answered: NIO's
/// pipelining handler stops reading the socket while a response is due, but decodes
/// everything a read already brought, and keeps every request it decoded until its
/// turn — 256 KiB of tiny pipelined requests became ~5.5 MiB of parsed heads. Here,
/// between the decoder and that handler, at most ``maximumWaiting`` requests and
/// ``maximumWaitingBytes`` of their heads may wait behind the one being answered;
/// one more closes the connection at once, whatever was answered so far (browsers do
/// not pipeline; 17 requests in one write are 16 waiting behind the first). Request
/// bodies, which neither listener reads, are dropped as they are decoded, never queued.
///
/// So an HTTP connection holds at most: one wakeup's reads (the decoder's buffer),
/// the request being answered, and 64 KiB of waiting heads (PROTOCOL §8).
final class HTTPRequestQueue: ChannelDuplexHandler, RemovableChannelHandler {
    typealias InboundIn = HTTPServerRequestPart
    typealias InboundOut = HTTPServerRequestPart
    typealias OutboundIn = HTTPServerResponsePart
    typealias OutboundOut = HTTPServerResponsePart

    /// Requests that may wait behind the one being answered.
    static let maximumWaiting = 16
    /// What their heads may hold together, counted as the URI's and every header's
    /// bytes plus 64 per request and 4 per header.
    static let maximumWaitingBytes = 64 * 1024

    private let logger: Logger
    /// The size of each request read and not yet answered, the first being answered.
    private var sizes: [Int] = []
    private var waitingBytes = 0
    private var refused = false

    init(logger: Logger) {
        self.logger = logger
    }

    /// What a request's head counts for.
    static func size(of head: HTTPRequestHead) -> Int {
        head.headers.reduce(64 + head.uri.utf8.count) { $0 + $1.name.utf8.count + $1.value.utf8.count + 4 }
    }

    func channelRead(context: ChannelHandlerContext, data: NIOAny) {
        guard !refused else { return }
        switch unwrapInboundIn(data) {
        case .head(let head):
            let size = Self.size(of: head)
            sizes.append(size)
            if sizes.count > 1 { waitingBytes += size }
            if sizes.count - 1 > Self.maximumWaiting || waitingBytes > Self.maximumWaitingBytes {
                refused = true
                logger.info(
                    "closing an HTTP connection that pipelined past its queue",
                    metadata: ["waiting": "\(sizes.count - 1)", "bytes": "\(waitingBytes)", "peer": "\(context.remoteAddress?.description ?? "?")"])
                context.close(promise: nil)
                return
            }
        case .body:
            return
        case .end:
            break
        }
        context.fireChannelRead(data)
    }

    func write(context: ChannelHandlerContext, data: NIOAny, promise: EventLoopPromise<Void>?) {
        if case .end = unwrapOutboundIn(data), !sizes.isEmpty {
            sizes.removeFirst()
            // The next request is being answered now: it no longer waits.
            if let next = sizes.first { waitingBytes -= next }
        }
        context.write(data, promise: promise)
    }
}
