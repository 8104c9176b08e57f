import Foundation
import ViewlineProtocol

/// A command failed: the server's error, with its stable code (PROTOCOL §7).
///
/// ```swift
/// do {
///     try await client.send("saved")
/// } catch let error as ViewlineError where error.code.rawValue == "login_required" {
///     try await client.send("login", arguments: ["user": "alice", "password": "wonderland"])
/// }
/// ```
public struct ViewlineError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The error's code: compare with `ErrorCode`'s constants (`.moved`, `.unavailable`…)
    /// or an app's own (`ErrorCode(rawValue: "login_required")`).
    public let code: ErrorCode
    /// The server's message, for people.
    public let message: String
    /// The whole `error` object, with any other fields it has.
    public let details: JSON

    /// An error reply with `code` and `message` (and the whole `error` object as `details`).
    public init(code: ErrorCode, message: String, details: JSON = .null) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// From a reply's `error` object.
    init(_ error: JSON) {
        self.init(
            code: ErrorCode(rawValue: error["code"]?.stringValue ?? "internal_error"),
            message: error["message"]?.stringValue ?? "", details: error)
    }

    /// How long to wait before trying again (`throttled`, `attach_throttled`,
    /// `server_busy`), when the server said.
    public var retryAfter: Duration? {
        // Any number a server sends: only a sane wait (up to a day) is taken.
        guard let seconds = details["retryAfter"]?.doubleValue, seconds.isFinite, (0...86_400).contains(seconds) else { return nil }
        return .milliseconds(Int64(seconds * 1000))
    }

    /// `moved`: where the session lives now.
    public var address: Endpoint? { details["address"]?.stringValue.flatMap(Endpoint.init) }

    /// `moved`: the owner's page, when it serves one: its WebSocket, for a client that came over one.
    public var webAddress: Endpoint? { details["web"]?.stringValue.flatMap(URL.init(string:)).flatMap(Endpoint.webSocket) }

    public var description: String { "\(code.rawValue): \(message)" }
}

/// The connection ended before a command's reply.
public struct ConnectionClosed: Error, Sendable, CustomStringConvertible {
    /// What happened, for people.
    public let message: String
    /// The server's last `bye`, if it said one.
    public let bye: Bye?
    /// The session ended for this client (a final `bye`, or it could not be resumed).
    public let sessionEnded: Bool

    public var description: String { message }
}

/// The server could not be reached, or did not welcome the client in time.
public struct ConnectError: Error, Sendable, CustomStringConvertible {
    /// The endpoint tried last.
    public let endpoint: Endpoint
    /// Why it failed (a refused connection, a TLS failure, a ``Timeout``).
    public let underlying: any Error

    public var description: String { "cannot connect to \(endpoint): \(underlying)" }
}

/// No reply (or event) came within the time allowed.
public struct Timeout: Error, Sendable, CustomStringConvertible {
    /// What was waited for.
    public let what: String

    /// A timeout waiting for `what`.
    public init(what: String) {
        self.what = what
    }

    public var description: String { "no \(what) within the time allowed" }
}
