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
        guard command.masksArguments else {
            let arguments = request.arguments.json
            let size = SessionRecording.overhead + request.name.utf8.count + SessionRecording.estimate(.object(arguments))
            return recording.keep(.command(name: request.name, id: request.id, arguments: arguments, connection: connection), size: size)
        }
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
        let size = SessionRecording.overhead + request.name.utf8.count + SessionRecording.estimate(.object(arguments))
        recording.keep(.command(name: request.name, id: request.id, arguments: arguments, connection: connection), size: size)
    }
}
