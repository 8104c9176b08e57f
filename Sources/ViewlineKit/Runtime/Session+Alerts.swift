/// Alerts: modal, one presented at a time, the rest queued (the runtime side of
/// ``ViewSession/ask(_:)`` and ``ViewSession/showAlert(_:)``).
extension Session {
    /// Shows an alert and waits for the user's answer: the one-liner flows use.
    ///
    /// ```swift
    /// switch await session.ask(AlertContent(title: "Delete?", message: "…", actions: [.confirm("Delete"), .cancel("Keep")])) {
    /// case .confirmed: …
    /// case .cancelled, .dismissed: …
    /// }
    /// ```
    ///
    /// Alerts are modal: if one is up, this one queues behind it. If the calling task
    /// is cancelled, the alert is taken down (`dismiss`) and `.dismissed` is returned.
    func ask(_ content: AlertContent) async -> AlertAnswer {
        let id = "a\(nextAlertNumber)"
        nextAlertNumber += 1
        // Waiting for a person is not background work: `wait` must not wait for it.
        // Whoever resumes the answer counts the work again (see `resolve`).
        runningWork -= 1
        checkSettled()
        return await withTaskCancellationHandler {
            await withCheckedContinuation { continuation in
                if Task.isCancelled {
                    runningWork += 1
                    continuation.resume(returning: .dismissed)
                    return
                }
                enqueue(PendingAlert(id: id, content: content, continuation: continuation))
            }
        } onCancel: {
            // From a synchronous cancellation handler: the dismissal hops onto the session.
            Task { await self.dismissAlert(id: id) }
        }
    }

    /// Shows an alert nobody waits on (an error with an OK button); nothing from
    /// background work that was replaced or cancelled.
    func showAlert(_ content: AlertContent) {
        guard !isStaleWork else { return }
        let id = "a\(nextAlertNumber)"
        nextAlertNumber += 1
        enqueue(PendingAlert(id: id, content: content, continuation: nil))
    }

    /// Hands the answer to whoever awaits the alert; its work is running again.
    func resolve(_ alert: PendingAlert, _ answer: AlertAnswer) {
        guard let continuation = alert.continuation else { return }
        runningWork += 1
        continuation.resume(returning: answer)
    }

    /// How many alerts may wait behind the presented one. A client that never answers
    /// while its commands keep failing must not grow the queue without end: past the
    /// cap, an error alert that is already waiting is not queued twice, the oldest
    /// waiting error alert makes room, and an `ask` with no room answers `.dismissed`.
    static let maximumQueuedAlerts = 16

    private func enqueue(_ alert: PendingAlert) {
        guard !closed else {
            resolve(alert, .dismissed)
            return
        }
        if presentedAlert == nil {
            present(alert)
            return
        }
        if queuedAlerts.count >= Self.maximumQueuedAlerts {
            let isAnswerless = alert.continuation == nil
            if isAnswerless, queuedAlerts.contains(where: { $0.continuation == nil && $0.content == alert.content }) {
                return
            }
            if let oldest = queuedAlerts.firstIndex(where: { $0.continuation == nil }) {
                queuedAlerts.remove(at: oldest)
            } else {
                resolve(alert, .dismissed)
                return
            }
        }
        queuedAlerts.append(alert)
    }

    private func present(_ alert: PendingAlert) {
        presentedAlert = alert
        emit { .alert(rev: $0, id: alert.id, content: alert.content) }
    }

    private func presentNext() {
        guard presentedAlert == nil, !queuedAlerts.isEmpty else { return }
        present(queuedAlerts.removeFirst())
    }

    /// `confirm` / `cancel`: checks the answer against the presented alert, then
    /// resolves it and presents the next one (after the reply, like every event).
    func answerAlert(id: String?, confirm: Bool, fields: [String: String]) throws(ProtocolError) -> JSON {
        let verb = confirm ? "confirm" : "cancel"
        guard let alert = presentedAlert else {
            throw ProtocolError(.noAlert, "no alert is presented")
        }
        if let id, id != alert.id {
            throw ProtocolError(.staleAlert, "alert \(id) is not the presented alert (\(alert.id))")
        }
        if !confirm && !alert.content.hasCancel {
            throw ProtocolError(.noCancelAction, "alert \(alert.id) has no cancel action; answer it with confirm")
        }
        var answer = AlertAnswer.cancelled
        if confirm {
            let names = Set(alert.content.fields.map(\.name))
            if let unknown = fields.keys.sorted().first(where: { !names.contains($0) }) {
                throw ProtocolError(
                    .badArguments,
                    names.isEmpty
                        ? "alert \(alert.id) has no fields (got \(unknown))"
                        : "alert \(alert.id) has no field \(unknown); its fields: \(alert.content.fields.map(\.name).joined(separator: ", "))")
            }
            let missing = alert.content.fields.map(\.name).filter { fields[$0] == nil }
            if !missing.isEmpty {
                throw ProtocolError(
                    .badArguments, "alert \(alert.id) needs \(missing.joined(separator: ", ")); usage: confirm [alert-id] name=value ...")
            }
            answer = .confirmed(fields: fields)
        }
        presentedAlert = nil
        // Answered on one connection, answered for all: every connection takes it
        // down, and the log keeps the trace, so a client that replays from a `rev`
        // before the answer (its reply lost with its connection) learns it too.
        emit { .dismiss(rev: $0, id: alert.id) }
        resolve(alert, answer)
        presentNext()
        let action = alert.content.actions.first { $0.role == (confirm ? .confirm : .cancel) }
        return ["alert": .string(alert.id), "answer": .string(verb), "action": .string(action?.label ?? "")]
    }

    /// Takes an alert down unanswered: `dismiss` if it was presented, silently if queued.
    func dismissAlert(id: String) {
        if presentedAlert?.id == id, let alert = presentedAlert {
            presentedAlert = nil
            emit { .dismiss(rev: $0, id: id) }
            resolve(alert, .dismissed)
            presentNext()
        } else if let index = queuedAlerts.firstIndex(where: { $0.id == id }) {
            let alert = queuedAlerts.remove(at: index)
            resolve(alert, .dismissed)
        }
    }

    /// How many alerts wait behind the presented one.
    package var queuedAlertCount: Int { queuedAlerts.count }

    /// The id of the presented alert, for tests and `state`.
    package var presentedAlertID: String? { presentedAlert?.id }

    /// What the presented alert shows, if one is up.
    package var presentedAlertContent: AlertContent? { presentedAlert?.content }
}
