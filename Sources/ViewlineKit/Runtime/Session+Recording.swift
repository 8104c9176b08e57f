import ViewlineProtocol

/// The command side of a session's recording (see SessionRecording.swift).
extension Session {
    /// What a masked secret reads as in a recording: a replay asks the test for it.
    package static let maskedSecret: JSON = "•••"

    /// Records `request` as it begins, as its JSON form with every secret masked and
    /// named in the step's `masked`: a secure argument, and every field of an
    /// alert's answer but those the presented alert declares and does not mark
    /// secure (a field typed before the alert came, misspelt, or meant for another
    /// alert may be a password all the same).
    func record(_ request: Request, of command: AnyCommand, from connection: Int, into recording: SessionRecording) {
        guard command.isRecorded else { return }
        guard command.masksArguments else {
            let arguments = request.arguments.json
            let size = SessionRecording.overhead + request.name.utf8.count + SessionRecording.estimate(.object(arguments))
            return recording.keep(
                .command(name: request.name, id: request.id, arguments: arguments, connection: connection, masked: []), size: size)
        }
        var arguments = JSONObject()
        var masked: [String] = []
        let plainFields = Set(presentedAlertContent?.fields.filter { !$0.secure }.map(\.name) ?? [])
        for (name, value) in request.arguments.json.pairs {
            let argument = command.spec.arguments.first { $0.name == name }
            if argument?.isSecure ?? false {
                arguments[name] = Self.maskedSecret
                masked.append(name)
            } else if argument?.kind == .fields, case .object(let fields) = value {
                var kept = JSONObject()
                for (field, answer) in fields.pairs {
                    if plainFields.contains(field) {
                        kept[field] = answer
                    } else {
                        kept[field] = Self.maskedSecret
                        masked.append("\(name).\(field)")
                    }
                }
                arguments[name] = .object(kept)
            } else {
                arguments[name] = value
            }
        }
        let size =
            SessionRecording.overhead + request.name.utf8.count + SessionRecording.estimate(.object(arguments))
            + masked.reduce(0) { $0 + $1.utf8.count + 16 }
        recording.keep(.command(name: request.name, id: request.id, arguments: arguments, connection: connection, masked: masked), size: size)
    }

    /// A command's reply as a recording keeps it: the values of the command's secret
    /// result keys masked, and named.
    static func recorded(_ message: ServerMessage, of command: AnyCommand) -> (ServerMessage, masked: [String]) {
        guard !command.secretResults.isEmpty, case .reply(let re, .success(.object(var result))) = message else { return (message, []) }
        var masked: [String] = []
        for key in command.secretResults.sorted() where result[key] != nil {
            result[key] = maskedSecret
            masked.append("result.\(key)")
        }
        return (.reply(re: re, result: .success(.object(result))), masked)
    }
}
