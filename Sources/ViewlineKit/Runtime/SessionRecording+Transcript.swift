import Foundation
import ViewlineProtocol

/// A recording as a transcript's lines (docs/transcripts.md): a header, then one
/// JSON object per step. One codec both ways: `export` writes it, a replay reads it.
extension SessionRecording {
    /// The transcript format's version, in its header's `transcript`.
    package static let transcriptVersion = 1

    /// The header line's fields: what was recorded, where, and whether it was cut.
    package static func header(session: String, server: String, views: [String], admin: Bool, began: Date, steps: Int, cut: Bool) -> JSON {
        [
            "transcript": .int(transcriptVersion), "session": .string(session), "server": .string(server),
            "views": .array(views.map(JSON.string)), "admin": .bool(admin), "began": .string(began.formatted(.iso8601)),
            "steps": .int(steps), "cut": .bool(cut),
        ]
    }
}

extension SessionRecording.Step {
    /// The step as its transcript line.
    package var json: JSON {
        switch self {
        case .command(let request, let connection, let masked):
            masked.isEmpty
                ? ["command": request, "connection": .int(connection)]
                : ["command": request, "connection": .int(connection), "masked": .array(masked.map(JSON.string))]
        case .reply(let line, let masked):
            masked.isEmpty ? ["reply": Self.parsed(line)] : ["reply": Self.parsed(line), "masked": .array(masked.map(JSON.string))]
        case .event(let line): ["event": Self.parsed(line)]
        case .call(let number, let backend, let arguments):
            arguments.map { ["call": .int(number), "backend": .string(backend), "arguments": $0] }
                ?? ["call": .int(number), "backend": .string(backend)]
        case .answer(let number, .value(let value)): ["answer": .int(number), "value": value]
        case .answer(let number, .failure(let code, let message)):
            ["answer": .int(number), "error": ["code": .string(code), "message": .string(message)]]
        case .answer(let number, .serviceFailure(let service, let message)):
            ["answer": .int(number), "error": ["service": .string(service), "message": .string(message)]]
        case .answer(let number, .opaqueFailure(let type)): ["answer": .int(number), "error": ["type": .string(type)]]
        case .answer(let number, .unrecordable(let type)): ["answer": .int(number), "unrecordable": .string(type)]
        case .clock(let seconds): ["clock": .double(seconds)]
        case .sleep(let number, let seconds): ["sleep": .int(number), "seconds": .double(seconds)]
        case .woke(let number, let cancelled): ["woke": .int(number), "cancelled": .bool(cancelled)]
        }
    }

    /// A step read from its transcript line; `nil` when the line is not one.
    package init?(json: JSON) {
        guard case .object(let object) = json else { return nil }
        let masked = object["masked"]?.arrayValue?.compactMap(\.stringValue) ?? []
        if let request = object["command"], case .object = request {
            self = .command(request, connection: object["connection"]?.intValue ?? 0, masked: masked)
        } else if let reply = object["reply"] {
            self = .reply(Array(reply.encoded.utf8), masked: masked)
        } else if let event = object["event"] {
            self = .event(Array(event.encoded.utf8))
        } else if let number = object["call"]?.intValue, let backend = object["backend"]?.stringValue {
            self = .call(number, backend: backend, arguments: object["arguments"])
        } else if let number = object["answer"]?.intValue {
            if let value = object["value"] {
                self = .answer(number, .value(value))
            } else if let code = object["error"]?["code"]?.stringValue {
                self = .answer(number, .failure(code: code, message: object["error"]?["message"]?.stringValue ?? ""))
            } else if let service = object["error"]?["service"]?.stringValue {
                self = .answer(number, .serviceFailure(service: service, message: object["error"]?["message"]?.stringValue ?? ""))
            } else if let type = object["error"]?["type"]?.stringValue {
                self = .answer(number, .opaqueFailure(type: type))
            } else if let type = object["unrecordable"]?.stringValue {
                self = .answer(number, .unrecordable(type: type))
            } else {
                return nil
            }
        } else if let seconds = object["clock"]?.doubleValue {
            self = .clock(seconds)
        } else if let number = object["sleep"]?.intValue, let seconds = object["seconds"]?.doubleValue {
            self = .sleep(number, seconds: seconds)
        } else if let number = object["woke"]?.intValue {
            self = .woke(number, cancelled: object["cancelled"]?.boolValue ?? false)
        } else {
            return nil
        }
    }

    /// A sent line as JSON (it was made by the server's encoder: it parses).
    private static func parsed(_ line: [UInt8]) -> JSON {
        (try? JSON.parse(line)) ?? .string(String(decoding: line, as: UTF8.self))
    }
}

extension Session {
    /// `export <session>`: the session's recording as a transcript, its lines in
    /// one string.
    package func transcript() throws -> JSON {
        guard let recording else {
            throw ProtocolError(.adminDisabled, "this server records no sessions; start it with the inspector on (--admin or an inspector token)")
        }
        let (steps, cut) = recording.steps
        let header = SessionRecording.header(
            session: id, server: application.serverName, views: application.views.map(\.name), admin: application.admin,
            began: recording.began, steps: steps.count, cut: cut)
        var text = header.encoded + "\n"
        for step in steps { text += step.json.encoded + "\n" }
        return ["session": .string(id), "steps": .int(steps.count), "cut": .bool(cut), "transcript": .string(text)]
    }
}
