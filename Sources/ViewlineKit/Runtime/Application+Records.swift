import CoreMetrics
import Logging

extension Application {
    /// How many unreadable records `inspect` lists (the newest).
    static let unreadableRecordsKept = 32

    /// A restore could not read `record`'s view: said in the log, counted
    /// (`viewline_records_unreadable_total{view,reason}`) and kept for `inspect`.
    /// The same record found again (a client retrying its attach during a deploy) is
    /// logged at debug level only and neither counted nor kept again: one retrying
    /// client never floods the log or pushes the others out of `inspect`'s list.
    func unreadableRecord(_ record: UnreadableRecord, logger: Logger) {
        let again = unreadableRecords.withLock { kept in kept.contains(record) }
        logger.log(
            level: again ? .debug : .error,
            "a session's record of a view cannot be read by this release",
            metadata: [
                "session": "\(record.session)", "view": "\(record.view)", "recorded-version": "\(record.recordedVersion)",
                "version": "\(record.version)", "reason": "\(record.reason.name)", "error": "\(record.reason.detail)",
                "outcome": "\(record.refused ? "attach refused, record kept" : "view restored at its initial state")",
            ])
        guard !again else { return }
        metrics?.recordUnreadable(view: record.view, reason: record.reason.name)
        unreadableRecords.withLock { kept in
            kept.append(record)
            if kept.count > Self.unreadableRecordsKept { kept.removeFirst(kept.count - Self.unreadableRecordsKept) }
        }
    }

    /// `inspect`'s list of them.
    var unreadableRecordsJSON: JSON {
        .array(
            unreadableRecords.withLock { $0 }.map { record in
                [
                    "session": .string(record.session), "view": .string(record.view), "recordedVersion": .int(record.recordedVersion),
                    "version": .int(record.version), "reason": .string(record.reason.name), "detail": .string(record.reason.detail),
                    "refused": .bool(record.refused),
                ]
            })
    }
}
