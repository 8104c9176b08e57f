import NIOCore

/// Where a ``LineFrameHandler`` ends a connection's pipeline (the server's TCP
/// connections): the framer is the last handler. When the channel becomes active it
/// asks its ``LineAcceptor`` who receives the connection's lines, then hands that
/// receiver each framed line and each change of the channel directly — no pipeline
/// hop, `NIOAny` box and dynamic cast per line, and no handler or context per
/// connection beyond the framer's own. Every call comes on the channel's event loop,
/// in the order the pipeline would have delivered them.
package protocol LineReceiver: AnyObject {
    /// A line (or an overlong one) from the framer.
    func received(_ frame: LineFrame)
    /// A read ended (after the lines it held).
    func readComplete()
    /// The client closed its sending side (after its last lines).
    func inputEnded()
    /// The channel closed (after its last line). Nothing more comes.
    func channelInactive()
}

/// Who receives an active connection's lines (see ``LineReceiver``).
package protocol LineAcceptor: AnyObject {
    /// The channel became active (or was, when the framer was added): its receiver,
    /// or `nil` to hand nothing more over (a refused connection, already closing).
    func accept(_ channel: any Channel) -> (any LineReceiver)?
}
