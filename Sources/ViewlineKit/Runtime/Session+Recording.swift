import ViewlineProtocol

/// The command side of a session's recording (see SessionRecording.swift).
extension Session {
    /// What a masked secret reads as in a recording: a replay asks the test for it.
    package static let maskedSecret: JSON = "•••"

    /// Records `request` as it begins, as its JSON form with every secret masked:
    /// a secure argument, and each field of an alert's answer that the presented
    /// alert marks secure.
    func record(_ request: Request, of command: AnyCommand, from connection: Int, into recording: SessionRecording) {
        guard command.isRecorded else { return }
        var arguments = JSONObject()
        let secureFields = Set(presentedAlertContent?.fields.filter(\.secure).map(\.name) ?? [])
        for (name, value) in request.arguments.json.pairs {
            let argument = command.spec.arguments.first { $0.name == name }
            if argument?.isSecure ?? false {
                arguments[name] = Self.maskedSecret
            } else if argument?.kind == .fields, case .object(let fields) = value {
                var kept = JSONObject()
                for (field, answer) in fields.pairs { kept[field] = secureFields.contains(field) ? Self.maskedSecret : answer }
                arguments[name] = .object(kept)
            } else {
                arguments[name] = value
            }
        }
        var line: JSONObject = ["cmd": .string(request.name)]
        if request.id != .null { line["id"] = request.id }
        if !arguments.pairs.isEmpty { line["args"] = .object(arguments) }
        recording.record(.command(.object(line), connection: connection))
    }
}
