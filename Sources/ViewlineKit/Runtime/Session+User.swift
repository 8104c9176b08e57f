/// The session's user: who is logged in, as the view-models see it. How a user
/// proves who they are is an app's business; the runtime only tells every
/// view-model when the user changes.
extension Session {
    /// Makes `user` the session's user and lets every view-model react
    /// (``ViewModel/userChanged(in:from:)``), in the server's order.
    func signIn(_ user: String) async {
        let previous = self.user
        self.user = user
        for hook in application.userChangedHooks { await hook(self, previous) }
    }

    /// Forgets the session's user and lets every view-model react.
    func signOut() async {
        guard let previous = user else { return }
        user = nil
        for hook in application.userChangedHooks { await hook(self, previous) }
    }
}
