import Foundation
import Logging
import ViewlineProtocol

#if canImport(Glibc)
    import Glibc
#endif

/// `--log-format json`: one JSON object per line on standard error, for log
/// shippers: `time` (RFC 3339, UTC, milliseconds), `level`, `message`, `label`,
/// `source`, and every metadata field as a top-level key (`session`, `cmd`,
/// `peer`, `code`, `record`, `error`, …). Lines are written whole, one `write`
/// each, so lines from different threads never interleave.
struct JSONLogHandler: LogHandler {
    let label: String
    var logLevel: Logger.Level = .info
    var metadata: Logger.Metadata = [:]
    var metadataProvider: Logger.MetadataProvider?

    init(label: String) {
        self.label = label
    }

    subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    func log(event: LogEvent) {
        var object: JSONObject = [
            "time": .string(Self.timestamp()), "level": .string(event.level.rawValue), "message": .string(event.message.description),
            "label": .string(label), "source": .string(event.source),
        ]
        var fields = metadata
        if let provided = metadataProvider?.get() { fields.merge(provided) { _, new in new } }
        if let explicit = event.metadata { fields.merge(explicit) { _, new in new } }
        if let error = event.error, fields["error"] == nil { fields["error"] = "\(error)" }
        for (key, value) in fields where object[key] == nil { object[key] = .string(value.description) }
        let line = Array((JSON.object(object).encoded + "\n").utf8)
        _ = line.withUnsafeBytes { write(2, $0.baseAddress, $0.count) }
    }

    private static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        return String(
            format: "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
            parts.tm_hour, parts.tm_min, parts.tm_sec, now.tv_nsec / 1_000_000)
    }
}
