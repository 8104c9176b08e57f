/// How long sessions live without a connection, how many there may be, and how
/// far back a reconnecting client can catch up.
public struct SessionLimits: Sendable {
    /// How long a session with no connection lives on before it expires.
    public var timeToLive: Duration = .seconds(300)
    /// Most sessions at once, attached or not; when full, the oldest detached one expires first.
    public var maximumSessions = 10_000
    /// Events kept for replay after `attach <token> <last-rev>`…
    public var eventLogEvents = 256
    /// …and at most this many bytes of them.
    public var eventLogBytes = 1 << 20

    public init() {}
}
