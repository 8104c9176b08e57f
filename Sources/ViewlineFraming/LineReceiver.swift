import NIOCore

/// What a ``LineFrameHandler`` hands each framed line to directly when it is put
/// right in front of it (the server's connection handler): no pipeline hop, `NIOAny`
/// box and dynamic cast per line.
package protocol LineReceiver: AnyObject {
    /// A line (or an overlong one) from the framer, on the channel's event loop.
    func received(_ frame: LineFrame)
}
