import NIOCore

extension TimeAmount {
    /// How long a connection being closed after its last bytes (lines, a `bye`, a
    /// WebSocket close frame) is given to read them: a client that does not read
    /// would otherwise keep its descriptor and buffers forever.
    package static let closingDeadline = TimeAmount.seconds(2)
}
