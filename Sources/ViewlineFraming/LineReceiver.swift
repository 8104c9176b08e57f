import NIOCore

/// What a ``LineFrameHandler`` hands each framed line to directly when it is put
/// right in front of it (the server's connection handler): no pipeline hop, `NIOAny`
/// box and dynamic cast per line.
package protocol LineReceiver: AnyObject {
    /// A line (or an overlong one) from the framer, on the channel's event loop.
    func received(_ frame: LineFrame)
}

extension TimeAmount {
    /// How long a connection being closed after its last bytes (lines, a `bye`, a
    /// WebSocket close frame) is given to read them: a client that does not read
    /// would otherwise keep its descriptor and buffers forever.
    package static let closingDeadline = TimeAmount.seconds(2)
}
