import CoreMetrics
import Logging

extension Application {
    /// How many unreadable records `inspect` lists (the newest).
    static let unreadableRecordsKept = 32

    /// A restore could not read `record`'s view: said in the log, counted
    /// (`viewline_records_unreadable_total{view,reason}`) and kept for `inspect`.
    func unreadableRecord(_ record: UnreadableRecord, logger: Logger) {
        logger.error(
            "a session's record of a view cannot be read by this release",
            metadata: [
                "session": "\(record.session)", "view": "\(record.view)", "recorded-version": "\(record.recordedVersion)",
                "version": "\(record.version)", "reason": "\(record.reason.name)", "error": "\(record.reason.detail)",
                "outcome": "\(record.refused ? "attach refused, record kept" : "view restored at its initial state")",
            ])
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
