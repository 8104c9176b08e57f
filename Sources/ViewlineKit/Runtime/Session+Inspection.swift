import Foundation

/// What the inspector (`inspect`, admin only) reads of a session: a summary for the
/// list of sessions, and one session's timeline with its events and its views as
/// they were at a `rev`, from its event log (read-only: nothing here changes the
/// session).
extension Session {
    /// Notes what happened in the session's timeline, when the inspector is on, at
    /// `rev` (the session's now; a command's, the rev it started at).
    func note(_ kind: SessionTimeline.Kind, at: Moment = .now, duration: Duration? = nil, rev: Int? = nil) {
        guard let timeline else { return }
        timeline.record(kind, rev: rev ?? self.rev, at: at, duration: duration)
    }

    /// One line of `inspect`'s list: where the session is and what it does.
    func inspectionSummary(now: Date = Date()) -> JSON {
        var summary: JSONObject = [
            "session": .string(id), "rev": .int(rev), "connections": .int(connections.count),
            "address": peer.map(JSON.string) ?? .null, "user": user.map(JSON.string) ?? .null,
            "views": .array(displayedViews.sorted().map { .string(application.views[$0].name) }),
            "alerts": .int((presentedAlert == nil ? 0 : 1) + queuedAlerts.count),
            "tasks": .array(tasks.keys.map(\.name).sorted().map(JSON.string)),
        ]
        if let timeline {
            summary["ageSeconds"] = .double((now.timeIntervalSince(timeline.created) * 10).rounded() / 10)
            if let last = timeline.lastCommand {
                summary["lastCommand"] = .string(last.name)
                summary["lastCommandAt"] = .string(timeline.date(of: last.at).formatted(.iso8601))
            }
        }
        return .object(summary)
    }

    /// `inspect <session> [from-rev]`: the summary; the timeline from `from` on; the
    /// events after `from` the event log still holds (as they were sent); and each
    /// view's state as it was displayed at `from` — the current state for one not
    /// displayed since, the initial state for one first displayed after it (when the
    /// log reaches back to the session's first event), `null` when its state then is
    /// older than the log reaches (the replay budget). `from` defaults to the oldest rev the log holds.
    func inspection(from requested: Int?) -> JSON {
        let kept = log.kept()
        let oldest = kept.first.map { $0.rev - 1 } ?? rev
        let from = min(max(requested ?? oldest, 0), rev)
        var states = JSONObject()
        for index in application.views.indices {
            states[application.views[index].name] = encodedState(index).json
        }
        // Back from now to `from`: a view displayed after `from` had, at `from`, the
        // state of its display before that (when the log still holds one).
        var settled = Set<String>()
        var displayedAfter = Set<String>()
        for event in kept.reversed() {
            guard let message = ServerMessage(line: event.line), case .display(_, let view, let state) = message else { continue }
            if settled.contains(view) { continue }
            if event.rev > from {
                displayedAfter.insert(view)
            } else {
                states[view] = state
                settled.insert(view)
            }
        }
        // Displayed only after `from`: the state it started with when the log reaches
        // back to the session's first event, unknown otherwise.
        let fromTheStart = kept.first?.rev == 1
        for index in application.views.indices {
            let view = application.views[index]
            guard displayedAfter.contains(view.name), !settled.contains(view.name) else { continue }
            states[view.name] = fromTheStart ? view.encodeState(view.makeState(application.services)).json : .null
        }
        let events: [JSON] = kept.filter { $0.rev > from }.compactMap { event in
            event.line.withUnsafeBufferPointer { try? JSONParser.parse($0) }
        }
        return [
            "session": inspectionSummary(), "from": .int(from), "oldestRev": .int(oldest), "states": .object(states),
            "timeline": .array(timeline.map { timeline in timeline.entries(from: from).map { $0.json(at: timeline.date(of: $0.at)) } } ?? []),
            "events": .array(events),
            "recording": .bool(timeline != nil),
        ]
    }
}
