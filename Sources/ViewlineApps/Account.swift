import Foundation
import ViewlineKit

/// Logging in and out (the `session` view): a password check, an access token
/// with a lifetime, and the session's user that the other flows react to.
public enum Account: ViewModel {
    /// Shown as `{user, loggedIn}`; the access token stays on the server.
    public struct State: Codable, Sendable, Equatable {
        public var user: String?
        public var accessToken: AccessToken?
        public var loggedIn: Bool { user != nil }

        public init(user: String? = nil, accessToken: AccessToken? = nil) {
            self.user = user
            self.accessToken = accessToken
        }

        enum CodingKeys: String, CodingKey { case user, loggedIn }

        /// From a cluster record: the user (the access token never leaves the server).
        public init(from decoder: any Decoder) throws {
            let container = try decoder.container(keyedBy: CodingKeys.self)
            self.init(user: try container.decodeIfPresent(String.self, forKey: .user))
        }

        public func encode(to encoder: any Encoder) throws {
            var container = encoder.container(keyedBy: CodingKeys.self)
            try container.encode(user, forKey: .user)
            try container.encode(loggedIn, forKey: .loggedIn)
        }
    }

    public static let view = "session"
    public static let stateSummary = "{user, loggedIn}"
    public static func initialState(_ services: Services) -> State { State() }
    public static let errors: [ErrorCode] = [.loginRequired, .loginFailed, .loginThrottled]

    /// `login`'s arguments.
    static let user = ArgumentKey.word("user").described("who you are")
    static let password = ArgumentKey.word("password", allowsEmpty: true, secure: true).described("your password")

    public static let commands: [Command<Account>] = [
        Command(
            "login", summary: "Log in; the session gets an access token with a lifetime.",
            arguments: [user.argument, password.argument], example: "login alice wonderland", primary: true
        ) { session, args in
            let user = args[Account.user]
            switch await logIn(user: user, password: args[Account.password], in: session) {
            case .success:
                return ["user": .string(user), "expiresIn": .int(Int(session.services.tokenLifetime))]
            case let failure:
                throw failure.error!
            }
        },
        Command("logout", summary: "Log out and drop the access token.") { session, _ in
            let user = session.user
            await session.signOut()
            return ["user": user.map(JSON.string) ?? .null, "loggedIn": false]
        },
    ]

    public static func userChanged(in session: isolated ViewSession<Account>, from previous: String?) async {
        let user = session.user
        session.update {
            $0.user = user
            if user == nil { $0.accessToken = nil }
        }
    }

    /// Restored on another node: the session's user stays logged in (the client
    /// proved the session with its token) with a fresh access token, since the old
    /// one never left the node that died.
    public static func restored(in session: isolated ViewSession<Account>) async {
        let services = session.services
        let user = session.user
        session.update(display: false) {
            $0.user = user
            $0.accessToken = user.map {
                AccessToken(value: Session.makeSecret(), user: $0, expiresAt: services.clock.now() + services.tokenLifetime)
            }
        }
    }

    /// The longest user name there is (PROTOCOL §8).
    public static let maximumUserNameBytes = 64

    /// How a log-in attempt ended.
    public enum LoginOutcome: Sendable, Equatable {
        case success
        /// The user name or password is wrong (which one is not said).
        case wrongPassword
        /// Too many failures for this user or from this address: wait this many seconds.
        case throttled(seconds: Int)
        /// Too many log-ins are being checked right now.
        case overloaded

        /// The error a `login` command replies with (`nil` for success).
        public var error: ProtocolError? {
            switch self {
            case .success: nil
            case .wrongPassword: ProtocolError(.loginFailed, "login failed: wrong user name or password")
            case .throttled(let seconds):
                ProtocolError(.loginThrottled, "too many failed logins; try again in \(seconds) s", retryAfter: seconds)
            case .overloaded: ProtocolError(.serverBusy, "too many logins are being checked; try again in a moment", retryAfter: 1)
            }
        }
    }

    /// Verifies the password and, on success, issues the access token and makes
    /// `user` the session's user (the other flows react: a pending draft is offered,
    /// a playlist waiting for login goes on).
    ///
    /// The password is hashed on the bounded password pool, never on the session's
    /// executor; guessing is throttled per user and per address.
    public static func logIn<Model>(user: String, password: String, in session: isolated ViewSession<Model>) async -> LoginOutcome {
        let services = session.services
        let throttle = services.loginThrottle
        let keys = FailureThrottle.keys(user: user, peer: session.peer)
        if let seconds = throttle.loginWait(user: user, peer: session.peer, now: services.clock.now()) {
            return .throttled(seconds: seconds)
        }
        // No user has a longer name: refused like a wrong password, without hashing.
        guard user.utf8.count <= maximumUserNameBytes else {
            throttle.failed(keys, now: services.clock.now())
            return .wrongPassword
        }
        let users = services.users
        let ok: Bool
        do {
            ok = try await services.passwordPool.run(key: session.peer) { users.verify(user: user, password: password) }
        } catch {
            return .overloaded
        }
        guard ok else {
            throttle.failed(keys, now: services.clock.now())
            return .wrongPassword
        }
        throttle.succeeded(FailureThrottle.successKey(user: user, peer: session.peer))
        if let current = session.user, current != user { await session.signOut() }
        let token = AccessToken(value: Session.makeSecret(), user: user, expiresAt: services.clock.now() + services.tokenLifetime)
        session.sibling(Account.self) { account in account.update(display: false) { $0.accessToken = token } }
        await session.signIn(user)
        return .success
    }

    /// Whether the session holds an access token that has not expired.
    public static func hasValidToken<Model>(in session: isolated ViewSession<Model>) -> Bool {
        guard let token = session.sibling(Account.self, { $0.state.accessToken }) else { return false }
        return session.services.clock.now() < token.expiresAt
    }

    /// The session's user, or `login_required` naming the command that needs one.
    public static func requireUser<Model>(for command: String, in session: isolated ViewSession<Model>) throws(ProtocolError) -> String {
        guard let user = session.user else {
            throw ProtocolError(.loginRequired, "\(command) needs a logged-in session; log in with: login <user> <password>")
        }
        return user
    }
}

/// An access token issued at login, valid until `expiresAt`.
public struct AccessToken: Sendable, Equatable {
    public var value: String
    public var user: String
    public var expiresAt: Date
}

extension ErrorCode {
    public static let loginRequired = ErrorCode("login_required", meaning: "The command needs a logged-in session.")
    public static let loginFailed = ErrorCode("login_failed", meaning: "The user name or password is wrong (which one is not said).")
    public static let loginThrottled = ErrorCode(
        "login_throttled", meaning: "Too many failed log-ins for this user or from this address; the message says how long to wait.")
}
