import ViewlineProtocol

/// Unsaved drafts (seed 000): kept locally until saved or discarded; a failing
/// save asks "save again?" as many times as it fails; a draft left from an earlier
/// session is offered at login.
extension Session {
    static func saveFailedAlert(_ reason: String) -> AlertContent {
        AlertContent(
            title: "Error",
            message: "Saving failed: \(reason). Save again?",
            actions: [.confirm("Save"), .cancel("Discard")])
    }

    static let unsavedDraftAlert = AlertContent(
        title: "",
        message: "You have unsaved data from last time. Do you want to save it?",
        actions: [.confirm("Save"), .cancel("Discard")])

    func setDraft(_ text: String) async throws -> JSON {
        let user = try requireLogin("draft")
        // Durable before the reply: a client or server that dies now loses nothing.
        try await environment.database.setDraft(user: user, text: text, at: environment.clock.now())
        draftView.text = text
        draftView.pending = true
        display(.draft)
        return ["pending": true]
    }

    func startSave() async throws -> JSON {
        let user = try requireLogin("save")
        guard !draftView.saving, tasks[.save] == nil else {
            throw ProtocolError(.busy, "a save is already in progress")
        }
        guard let draft = try await environment.database.pendingDraft(user: user) else {
            throw ProtocolError(.nothingToSave, "there is no pending draft; set one with: draft <text>")
        }
        draftView.text = draft.text
        draftView.pending = true
        run(.save) { session in await session.saveLoop(user: user) }
        return ["accepted": true]
    }

    func listSaved() async throws -> JSON {
        let user = try requireLogin("saved")
        let saved = try await environment.remoteStore.saved(user: user)
        return ["drafts": .array(saved.map { ["text": .string($0.text), "savedAt": .string($0.savedAt.formatted(.iso8601))] })]
    }

    /// At login: a draft this user left pending earlier is offered with Save/Discard.
    func offerPendingDraft(user: String) async {
        guard tasks[.save] == nil,
            let draft = try? await environment.database.pendingDraft(user: user),
            loggedInUser == user
        else { return }
        draftView = DraftViewState(text: draft.text, pending: true, saving: false)
        display(.draft)
        run(.save) { session in
            switch await session.ask(Session.unsavedDraftAlert) {
            case .confirmed: await session.saveLoop(user: user)
            case .cancelled: await session.discardDraft(user: user)
            case .dismissed: break
            }
        }
    }

    /// Save; on failure ask "save again?" until it succeeds or the user discards.
    private func saveLoop(user: String) async {
        let store = environment.remoteStore
        let database = environment.database
        while !Task.isCancelled {
            guard let draft = try? await database.pendingDraft(user: user) else {
                draftView = DraftViewState()
                display(.draft)
                return
            }
            draftView = DraftViewState(text: draft.text, pending: true, saving: true)
            display(.draft)
            do {
                _ = try await call(.save) { try await store.save(user: user, text: draft.text) }
                _ = try? await database.deleteDraft(user: user, ifText: draft.text)
                let remaining = try? await database.pendingDraft(user: user)
                draftView = DraftViewState(text: remaining?.text ?? "", pending: remaining != nil, saving: false)
                display(.draft)
                return
            } catch {
                draftView.saving = false
                display(.draft)
                if Task.isCancelled || error is CancellationError { return }
                switch await ask(Session.saveFailedAlert(Session.describe(error))) {
                case .confirmed: continue
                case .cancelled:
                    await discardDraft(user: user)
                    return
                case .dismissed: return
                }
            }
        }
    }

    private func discardDraft(user: String) async {
        _ = try? await environment.database.deleteDraft(user: user)
        draftView = DraftViewState()
        display(.draft)
    }
}
