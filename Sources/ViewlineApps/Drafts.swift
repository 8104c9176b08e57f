import ViewlineKit
import ViewlinePersistence

/// Unsaved drafts (seed 000): kept locally until saved or discarded; a failing save
/// asks "save again?" as many times as it fails; a draft left from an earlier
/// session is offered at login.
public enum Drafts: ViewModel {
    public struct State: Codable, Sendable, Equatable {
        public var text = ""
        public var pending = false
        public var saving = false

        public init(text: String = "", pending: Bool = false, saving: Bool = false) {
            self.text = text
            self.pending = pending
            self.saving = saving
        }
    }

    public static let view = "draft"
    public static let stateSummary = "{text, pending, saving}"
    public static let busyFields = ["saving"]
    public static func initialState(_ services: Services) -> State { State() }
    public static let errors: [ErrorCode] = [.nothingToSave]
    public static let backends: [any BackendKey.Type] = [RemoteStoreKey.self]

    public static let commands: [Command<Drafts>] = [
        Command(
            "draft", summary: "Set your unsaved draft; it is stored locally before the reply.",
            arguments: [text.argument], example: "draft buy milk", primary: true
        ) { session, args in
            let user = try Account.requireUser(for: "draft", in: session)
            let text = args[Drafts.text]
            guard text.utf8.count <= SavedDraft.maximumTextBytes else {
                throw ProtocolError(.badArguments, "a draft is at most \(SavedDraft.maximumTextBytes) bytes (got \(text.utf8.count))")
            }
            // Durable before the reply: a client or server that dies now loses nothing.
            try await session.services.store.setDraft(user: user, text: text, at: session.services.clock.now())
            session.update {
                $0.text = text
                $0.pending = true
            }
            return ["pending": true]
        },
        Command("save", summary: "Save the pending draft to the remote store; on failure, asks to save again.") { session, _ in
            let user = try Account.requireUser(for: "save", in: session)
            guard !session.state.saving, !session.isRunning(.save) else {
                // Running but not saving: the flow waits on its alert (save again? or
                // the draft left from last time), not on the remote store.
                throw ProtocolError(
                    .busy,
                    session.state.saving
                        ? "a save is already in progress"
                        : "the draft waits for your answer to its alert: confirm to save it, cancel to discard it")
            }
            guard let draft = try await session.services.store.pendingDraft(user: user) else {
                throw ProtocolError(.nothingToSave, "there is no pending draft; set one with: draft <text>")
            }
            session.update(display: false) {
                $0.text = draft.text
                $0.pending = true
            }
            session.run(.save) { session in await saveLoop(user: user, in: session) }
            return ["accepted": true]
        },
        Command(
            "saved", summary: "List your saved drafts, newest first, 20 a page (the newest 100 are kept).",
            arguments: [page.argument], example: "saved 2"
        ) { session, args in
            let user = try Account.requireUser(for: "saved", in: session)
            let page = args[Drafts.page] ?? 1  // 1...savedPages: checked before this runs
            let saved = try await session.call(RemoteStoreKey.self, with: ["user": user]) { remote in try await remote.saved(user: user) }
            let pages = max(1, (saved.count + savedPageSize - 1) / savedPageSize)
            guard page <= pages else {
                throw ProtocolError(.badArguments, "page must be 1 to \(pages): you have \(saved.count) saved drafts (got \(page))")
            }
            let shown = saved.dropFirst((page - 1) * savedPageSize).prefix(savedPageSize)
            return [
                "drafts": .array(shown.map { ["text": .string($0.text), "savedAt": .string($0.savedAt.formatted(.iso8601))] }),
                "page": .int(page), "pages": .int(pages),
            ]
        },
    ]

    public static func userChanged(in session: isolated ViewSession<Drafts>, from previous: String?) async {
        guard let user = session.user else {
            session.cancel(.save)
            session.update { $0 = State() }
            return
        }
        // A draft this user left pending earlier is offered with Save/Discard.
        guard !session.isRunning(.save),
            let draft = try? await session.services.store.pendingDraft(user: user),
            session.user == user
        else { return }
        session.update { $0 = State(text: draft.text, pending: true, saving: false) }
        session.run(.save) { session in
            switch await session.ask(unsavedDraftAlert) {
            case .confirmed: await saveLoop(user: user, in: session)
            case .cancelled: await discard(user: user, in: session)
            case .dismissed: break
            }
        }
    }

    /// Restored on another node: the save that may have been running there is gone;
    /// the pending draft (in the store) is offered again, as at login.
    public static func restored(in session: isolated ViewSession<Drafts>) async {
        session.update(display: false) { $0.saving = false }
        await userChanged(in: session, from: session.user)
    }

    /// Saved drafts a `saved` page lists.
    static let savedPageSize = 20

    /// The most pages `saved` can have: the remote store keeps the newest 100.
    static let savedPages = (SavedDraft.maximumPerUser + savedPageSize - 1) / savedPageSize
    /// `draft`'s argument.
    static let text = ArgumentKey.text("text").described("what the draft says")
    /// `saved`'s argument.
    static let page = ArgumentKey.optionalInteger("page", minimum: 1, maximum: savedPages).described("which page of 20, newest first")

    static func saveFailedAlert(_ reason: String) -> AlertContent {
        AlertContent(title: "Error", message: "Saving failed: \(reason). Save again?", actions: [.confirm("Save"), .cancel("Discard")])
    }

    static let unsavedDraftAlert = AlertContent(
        title: "", message: "You have unsaved data from last time. Do you want to save it?",
        actions: [.confirm("Save"), .cancel("Discard")])

    /// Save; on failure ask "save again?" until it succeeds or the user discards.
    private static func saveLoop(user: String, in session: isolated ViewSession<Drafts>) async {
        let store = session.services.store
        while true {  // until saved, discarded, or the alert is dismissed (also when replaced)
            guard let draft = try? await store.pendingDraft(user: user) else {
                session.update { $0 = State() }
                return
            }
            session.update { $0 = State(text: draft.text, pending: true, saving: true) }
            do {
                _ = try await session.call(RemoteStoreKey.self, with: draft.text) { remote in try await remote.save(user: user, text: draft.text) }
                _ = try? await store.deleteDraft(user: user, ifText: draft.text)
                let remaining = try? await store.pendingDraft(user: user)
                session.update { $0 = State(text: remaining?.text ?? "", pending: remaining != nil, saving: false) }
                return
            } catch {
                session.update { $0.saving = false }
                switch await session.ask(saveFailedAlert(ServiceError.describe(error))) {
                case .confirmed: continue
                case .cancelled:
                    await discard(user: user, in: session)
                    return
                case .dismissed: return
                }
            }
        }
    }

    private static func discard(user: String, in session: isolated ViewSession<Drafts>) async {
        _ = try? await session.services.store.deleteDraft(user: user)
        session.update { $0 = State() }
    }
}

extension TaskSlot {
    static let save = TaskSlot("save")
}

extension ErrorCode {
    public static let nothingToSave = ErrorCode("nothing_to_save", meaning: "`save` with no pending draft.")
}
