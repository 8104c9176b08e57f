import NIOCore

/// Where a ``LineFrameHandler`` ends a connection's pipeline (the server's connection
/// handler): the framer is the last handler, and hands its receiver each framed line
/// and each change of the channel directly — no pipeline hop, `NIOAny` box and
/// dynamic cast per line, and no handler context of its own to hold per connection.
/// Every call comes on the channel's event loop, in the order the pipeline would
/// have delivered them.
package protocol LineReceiver: AnyObject {
    /// The channel became active (or was already, when the framer was added).
    func channelActive(_ channel: any Channel)
    /// A line (or an overlong one) from the framer.
    func received(_ frame: LineFrame)
    /// A read ended (after the lines it held).
    func readComplete()
    /// The client closed its sending side (after its last lines).
    func inputEnded()
    /// The channel closed (after its last line).
    func channelInactive()
}
