import ViewlineKit

/// The playlist (seed 003): check the token, else ask for login and reserve the
/// next step; after login the reserved step runs; pagination reserves "fetch next
/// page" until there is no more. ``PlaylistFlow`` decides; this carries it out.
public enum Playlist: ViewModel {
    public typealias State = PlaylistFlow

    public static let view = "playlist"
    public static let stateSummary = "{items:[{position, title, artist}], hasMore, loading, step}"
    public static let busyFields = ["loading"]
    public static func initialState(_ services: Services) -> State { PlaylistFlow() }
    public static let errors: [ErrorCode] = [.nothingPending, .busy]
    public static let backends: [any BackendKey.Type] = [PlaylistsKey.self]

    public static let commands: [Command<Playlist>] = [
        Command(
            "playlist", summary: "Start the playlist flow: check the token, log in if needed, fetch the first page.", primary: true
        ) { session, _ in
            let valid = Account.hasValidToken(in: session)
            let action = try session.update { flow throws(ProtocolError) in try flow.start(tokenValid: valid) }
            session.run(.playlist) { session in await drive(action, in: session) }
            return ["accepted": true, "step": .string(session.state.step.rawValue)]
        },
        Command("more", summary: "Fetch the next playlist page (the reserved step).", paging: true) { session, _ in
            let valid = Account.hasValidToken(in: session)
            let action = try session.update { flow throws(ProtocolError) in try flow.more(tokenValid: valid) }
            session.run(.playlist) { session in await drive(action, in: session) }
            return ["accepted": true, "step": .string(session.state.step.rawValue)]
        },
    ]

    public static func userChanged(in session: isolated ViewSession<Playlist>, from previous: String?) async {
        guard session.user != nil else {
            session.cancel(.playlist)
            session.update { $0 = PlaylistFlow() }
            return
        }
        if session.state.step == .awaitingLogin, session.presentedAlertContent == loginAlert,
            let id = session.presentedAlertID
        {
            // Logged in by command while the login alert was up: the alert is moot
            // and the flow goes on by itself.
            session.dismissAlert(id: id)
        }
    }

    static let loginAlert = AlertContent(
        title: "Log in",
        message: "Log in to see your playlist.",
        actions: [.confirm("Log in"), .cancel("Cancel")],
        fields: [AlertField(name: "user", label: "User"), AlertField(name: "password", label: "Password", secure: true)])

    static func loginFailureMessage(_ outcome: Account.LoginOutcome) -> String {
        switch outcome {
        case .throttled(let seconds): "Login failed: too many failed logins; try again in \(seconds) s."
        case .overloaded: "Login failed: the server is busy; try again in a moment."
        case .success, .wrongPassword: "Login failed: wrong user name or password."
        }
    }

    private static func drive(_ first: PlaylistFlow.Action, in session: isolated ViewSession<Playlist>) async {
        var next: PlaylistFlow.Action? = first
        while let action = next {
            next = nil
            switch action {
            case .askForLogin:
                switch await session.ask(loginAlert) {
                case .confirmed(let fields):
                    let outcome = await Account.logIn(user: fields["user"] ?? "", password: fields["password"] ?? "", in: session)
                    if outcome == .success {
                        next = session.update(display: false) { $0.loginSucceeded() }
                    } else {
                        session.update { $0.loginFailed() }
                        session.showAlert(.error(loginFailureMessage(outcome), title: "Login failed"))
                    }
                case .cancelled:
                    session.update { $0.loginCancelled() }
                case .dismissed:
                    // Logged in some other way while the alert was up: go on.
                    if Account.hasValidToken(in: session) {
                        next = session.update(display: false) { $0.loginSucceeded() }
                    }
                }
                if next != nil { session.display() }
            case .fetchPage(let offset):
                guard let user = session.user else { return }
                do {
                    let page = try await session.call(PlaylistsKey.self, with: ["offset": offset]) { playlists in
                        try await playlists.page(user: user, offset: offset, limit: PlaylistFlow.pageSize)
                    }
                    session.update { $0.pageLoaded(offset: offset, page) }
                } catch {
                    session.update { $0.pageFailed() }
                    session.showAlert(.error("Could not load the playlist: \(ServiceError.describe(error))"))
                }
            }
        }
    }
}

extension TaskSlot {
    static let playlist = TaskSlot("playlist")
}

extension ErrorCode {
    public static let nothingPending = ErrorCode("nothing_pending", meaning: "`more` with no reserved playlist step.")
}
