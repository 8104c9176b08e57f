/// How long sessions live without a connection, how many there may be, and how
/// far back a reconnecting client can catch up.
public struct SessionLimits: Sendable {
    /// How long a session with no connection lives on before it expires.
    public var timeToLive: Duration = .seconds(300)
    /// Most sessions at once, attached or not; when full, the oldest detached one
    /// of the address holding the most sessions makes room first, then that of the
    /// new session's own address, then the oldest of all.
    public var maximumSessions = 10_000
    /// Most sessions one client address may hold, attached or not (0: no cap); past
    /// it, that address's oldest detached session makes room, and with none, its
    /// new connection is refused. Sessions restored from a cluster record have no
    /// address of their own and count together.
    public var maximumSessionsPerAddress = 1_000
    /// Events kept for replay after `attach <token> <last-rev>`…
    public var eventLogEvents = 256
    /// …and at most this many bytes of them (each event counted as its line plus
    /// 48 bytes).
    public var eventLogBytes = 256 << 10
    /// The bytes every session's event log may hold together; past it, a log that
    /// grows drops its own oldest events first.
    public var eventLogBudgetBytes = 256 << 20
    /// The most one session's recording (a transcript for `export`, kept while the
    /// inspector is on) holds; it stops there. 0 records nothing. It counts against
    /// ``eventLogBudgetBytes`` too.
    public var recordingBytes = 128 << 10
    /// Most connections attached to one session at once (0: no cap); one more
    /// `attach` gets `server_busy`. Every event goes to every connection, so this
    /// bounds what one event costs.
    public var maximumConnectionsPerSession = 32
    /// `attach`es one client address may make a second, successful or not, with
    /// bursts of twice as many (0: no cap); past it, `attach_throttled`. Each attach
    /// makes the server send a snapshot (and in a cluster may query the database).
    public var attachesPerSecondPerAddress = 100

    /// The defaults above.
    public init() {}
}
