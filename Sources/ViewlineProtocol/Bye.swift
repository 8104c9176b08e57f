/// Why the server closes a connection: a stable `code` a client acts on and a
/// `reason` a person reads (`{"type":"bye","reason":"server shutting down","code":"shutdown"}`).
public struct Bye: Sendable, Equatable {
    /// The machine-readable half of a `bye`.
    public struct Code: RawRepresentable, Sendable, Hashable {
        public let rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }

        /// The client sent `quit`: the session is over (final).
        public static let quit = Code(rawValue: "quit")
        /// The session ended under this connection: `quit` on another of its
        /// connections (final).
        public static let ended = Code(rawValue: "ended")
        /// The session was detached longer than the server keeps sessions (final).
        public static let expired = Code(rawValue: "expired")
        /// The server made room for newer sessions (final).
        public static let evicted = Code(rawValue: "evicted")
        /// Another node serves the session now: attach again and follow `moved`.
        public static let moved = Code(rawValue: "moved")
        /// The server is shutting down; in a cluster its sessions were handed over:
        /// attach on another node (or this one when it is back).
        public static let shutdown = Code(rawValue: "shutdown")
        /// Another connection of the session ended this one (`end-others`) and the
        /// session's token changed: the session lives on, but not for this client (final).
        public static let revoked = Code(rawValue: "revoked")
        /// The connection was refused before its session began (too many clients,
        /// or from this address): try again later.
        public static let refused = Code(rawValue: "refused")

        /// Whether the session is gone for good, so a client should not try to resume it.
        public var isFinal: Bool { self == .quit || self == .ended || self == .expired || self == .evicted || self == .revoked }
    }

    /// Why the connection ends, for clients to act on (``Code/isFinal``).
    public var code: Code
    /// Why the connection ends, for people.
    public var reason: String

    /// What servers before 1.1 (no `code`) said in `reason` when the session ended.
    public static let finalReasonsBeforeCodes: Set<String> = ["client quit", "session ended", "session expired", "session evicted"]

    /// Whether a `bye` with this `code` (`nil` from a server before 1.1) and `reason`
    /// ends the session for the client: resuming is pointless. An unknown code is not
    /// final (PROTOCOL §4: try to resume, `attach` says whether the session lives).
    public static func isFinal(code: String?, reason: String) -> Bool {
        code.map { Code(rawValue: $0).isFinal } ?? finalReasonsBeforeCodes.contains(reason)
    }

    /// A `bye` with `code`, saying `reason`.
    public init(_ code: Code, _ reason: String) {
        self.code = code
        self.reason = reason
    }

    /// After `quit`: the client asked to leave.
    public static let quit = Bye(.quit, "client quit")
    /// The session was ended (by the server or a cluster `quit` elsewhere).
    public static let ended = Bye(.ended, "session ended")
    /// Nobody attached within the session's time to live.
    public static let expired = Bye(.expired, "session expired")
    /// The server dropped the session to make room (its session limit).
    public static let evicted = Bye(.evicted, "session evicted")
    /// Another connection of the session ran `end-others`.
    public static let revoked = Bye(.revoked, "ended by another connection of the session")
    /// Another node of the cluster holds the session now: attach there.
    public static let moved = Bye(.moved, "session moved")
    /// The server is shutting down: resume the session (it lives on in a cluster).
    public static let shutdown = Bye(.shutdown, "server shutting down")
}
