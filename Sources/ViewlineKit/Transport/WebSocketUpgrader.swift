import CSHA256
import Foundation
import NIOCore
import NIOHTTP1
import NIOWebSocket

/// The WebSocket opening handshake (RFC 6455 §4.2) for the web listener: checks the
/// request's key and version, asks `shouldUpgrade` (the path and the page's origin),
/// answers `101 Switching Protocols` with the key's `Sec-WebSocket-Accept`, and then
/// puts the connection's handlers in place — ``WebSocketLines`` reads and writes the
/// frames itself, so no frame decoder or encoder of NIO's sits in the pipeline.
///
/// A refused handshake fails with NIO's `NIOWebSocketUpgradeError`, as NIO's own
/// upgrader does: the request then reaches ``WebPageHandler``, which answers it.
struct WebSocketUpgrader: HTTPServerProtocolUpgrader, Sendable {
    let supportedProtocol = "websocket"
    /// None beyond `Upgrade`: RFC 6455 does not require the client to list the others
    /// in `Connection` (they are checked here instead).
    let requiredUpgradeHeaders: [String] = []
    let shouldUpgrade: @Sendable (any Channel, HTTPRequestHead) -> Bool
    let upgradePipeline: @Sendable (ChannelPipeline.SynchronousOperations) throws -> Void

    func buildUpgradeResponse(
        channel: any Channel, upgradeRequest: HTTPRequestHead, initialResponseHeaders: HTTPHeaders
    ) -> EventLoopFuture<HTTPHeaders> {
        let keys = upgradeRequest.headers[canonicalForm: "Sec-WebSocket-Key"]
        let versions = upgradeRequest.headers[canonicalForm: "Sec-WebSocket-Version"]
        guard keys.count == 1, versions.count == 1, versions.first == "13" else {
            return channel.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.invalidUpgradeHeader)
        }
        guard shouldUpgrade(channel, upgradeRequest) else {
            return channel.eventLoop.makeFailedFuture(NIOWebSocketUpgradeError.unsupportedWebSocketTarget)
        }
        // Upgrading: the request queue, which reads HTTP parts only, leaves before the
        // request decoder hands on what followed the request (the first frames).
        if let queue = try? channel.pipeline.syncOperations.handler(type: HTTPRequestQueue.self) {
            channel.pipeline.syncOperations.removeHandler(queue, promise: nil)
        }
        var headers = initialResponseHeaders
        headers.replaceOrAdd(name: "Upgrade", value: "websocket")
        headers.add(name: "Sec-WebSocket-Accept", value: Self.accept(key: String(keys.first!)))
        headers.replaceOrAdd(name: "Connection", value: "upgrade")
        return channel.eventLoop.makeSucceededFuture(headers)
    }

    func upgrade(context: ChannelHandlerContext, upgradeRequest: HTTPRequestHead) -> EventLoopFuture<Void> {
        context.eventLoop.makeCompletedFuture { try upgradePipeline(context.pipeline.syncOperations) }
    }

    /// `Sec-WebSocket-Accept` for a `Sec-WebSocket-Key` (RFC 6455 §4.2.2): the key and
    /// the protocol's GUID, hashed with SHA-1, in base64.
    static func accept(key: String) -> String {
        let input = Array((key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11").utf8)
        var digest = [UInt8](repeating: 0, count: 20)
        let ok = input.withUnsafeBufferPointer { viewline_sha1($0.baseAddress, $0.count, &digest) }
        precondition(ok == 1, "SHA-1 from libcrypto failed")
        return Data(digest).base64EncodedString()
    }
}
