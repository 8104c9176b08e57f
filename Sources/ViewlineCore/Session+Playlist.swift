import ViewlineProtocol

/// Carries out the playlist flow's decisions (see ``PlaylistFlow``).
extension Session {
    static let loginAlert = AlertContent(
        title: "Log in",
        message: "Log in to see your playlist.",
        actions: [.confirm("Log in"), .cancel("Cancel")],
        fields: [AlertField(name: "user", label: "User"), AlertField(name: "password", label: "Password", secure: true)])

    func startPlaylist() throws(ProtocolError) -> JSON {
        let action = try playlist.start(tokenValid: hasValidAccessToken)
        display(.playlist)
        run(.playlist) { session in await session.drivePlaylist(action) }
        return ["accepted": true, "step": .string(playlist.step.rawValue)]
    }

    func morePlaylist() throws(ProtocolError) -> JSON {
        let action = try playlist.more(tokenValid: hasValidAccessToken)
        display(.playlist)
        run(.playlist) { session in await session.drivePlaylist(action) }
        return ["accepted": true, "step": .string(playlist.step.rawValue)]
    }

    private func drivePlaylist(_ first: PlaylistFlow.Action) async {
        var next: PlaylistFlow.Action? = first
        while let action = next, !Task.isCancelled {
            next = nil
            switch action {
            case .askForLogin:
                switch await ask(Session.loginAlert) {
                case .confirmed(let fields):
                    if await logIn(user: fields["user"] ?? "", password: fields["password"] ?? "") {
                        next = playlist.loginSucceeded()
                    } else if !Task.isCancelled {
                        playlist.loginFailed()
                        display(.playlist)
                        showAlert(.error("Login failed: wrong user name or password.", title: "Login failed"))
                    }
                case .cancelled:
                    playlist.loginCancelled()
                    display(.playlist)
                case .dismissed:
                    // Logged in some other way while the alert was up: go on.
                    if !Task.isCancelled && hasValidAccessToken { next = playlist.loginSucceeded() }
                }
                if next != nil { display(.playlist) }
            case .fetchPage(let offset):
                guard let user = loggedInUser else { return }
                let service = environment.playlists
                do {
                    let page = try await call(.playlist) {
                        try await service.page(user: user, offset: offset, limit: PlaylistFlow.pageSize)
                    }
                    guard !Task.isCancelled else { return }
                    playlist.pageLoaded(offset: offset, page)
                    display(.playlist)
                } catch {
                    guard !Task.isCancelled, !(error is CancellationError) else { return }
                    playlist.pageFailed()
                    display(.playlist)
                    showAlert(.error("Could not load the playlist: \(Session.describe(error))"))
                }
            }
        }
    }
}
