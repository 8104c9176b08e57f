import Foundation
import ViewlineProtocol

/// An access token issued at login, valid until `expiresAt`.
struct AccessToken: Sendable {
    var value: String
    var user: String
    var expiresAt: Date
}

extension Session {
    var loggedInUser: String? { sessionView.user }

    var hasValidAccessToken: Bool {
        guard let accessToken else { return false }
        return environment.clock.now() < accessToken.expiresAt
    }

    func loginCommand(user: String, password: String) async throws(ProtocolError) -> JSON {
        guard await logIn(user: user, password: password) else {
            throw ProtocolError(.loginFailed, "login failed: wrong user name or password")
        }
        return ["user": .string(user), "expiresIn": .int(Int(environment.tokenLifetime))]
    }

    /// Verifies the password and, on success, issues the access token, shows the
    /// session view, resumes a playlist waiting for login and offers a pending draft.
    func logIn(user: String, password: String) async -> Bool {
        let users = environment.users
        // Hashing is slow on purpose: do it off the actor.
        let ok = await Task.detached { users.verify(user: user, password: password) }.value
        guard ok, !closed else { return false }
        if let current = loggedInUser, current != user { _ = logout() }
        accessToken = AccessToken(value: Session.makeSecret(), user: user, expiresAt: environment.clock.now() + environment.tokenLifetime)
        sessionView.user = user
        display(.session)
        if playlist.step == .awaitingLogin, let alert = presentedAlert, alert.content == Session.loginAlert {
            // Logged in by command while the playlist's login alert was up: the
            // alert is moot and the flow goes on by itself.
            dismissAlert(id: alert.id)
        }
        await offerPendingDraft(user: user)
        return true
    }

    func logout() -> JSON {
        let user = loggedInUser
        accessToken = nil
        sessionView.user = nil
        cancelTask(.save)
        cancelTask(.playlist)
        draftView = DraftViewState()
        playlist = PlaylistFlow()
        if user != nil {
            display(.session)
            display(.draft)
            display(.playlist)
        }
        return ["user": user.map(JSON.string) ?? .null, "loggedIn": false]
    }

    func requireLogin(_ command: String) throws(ProtocolError) -> String {
        guard let user = loggedInUser else {
            throw ProtocolError(.loginRequired, "\(command) needs a logged-in session; log in with: login <user> <password>")
        }
        return user
    }
}
