import ViewlineProtocol

/// A recorded session's transcript (docs/transcripts.md) written out as a Swift test
/// to read and edit (`viewline --test-from s1.jsonl`): a `TestStore` that answers
/// the backend calls itself, then one line per step — `send` with its reply, each
/// `receiveDisplay`/`receive(event:)` in the order a client gets them, each backend
/// call's recorded answer where the session got to it.
///
/// What a `Replay` plays exactly, this approximates: a call the session made while
/// a command ran is answered before the command is sent; commands from several
/// connections, and a command whose events were not held for its reply (`wait`), are
/// written in the order they were recorded and may need moving.
public struct TranscriptTestWriter {
    /// The test function's name.
    public var name: String
    /// The view-model types the test runs (`Todos`), as Swift names.
    public var apps: [String]

    /// A writer for a test called `name` over `apps`.
    public init(name: String = "theRecordedSessionPlaysTheSame", apps: [String] = []) {
        self.name = name
        self.apps = apps
    }

    /// What is wrong with a transcript: the line and why.
    public struct Failure: Error, CustomStringConvertible {
        public let line: Int
        public let reason: String
        public var description: String { "transcript line \(line): \(reason)" }
    }

    /// The Swift source of the test, from the transcript's text.
    ///
    /// - Throws: ``Failure`` for a text that is not a transcript.
    public func source(from text: String) throws -> String {
        let lines = text.split(separator: "\n", omittingEmptySubsequences: true)
        guard let first = lines.first, let header = try? JSON.parse(String(first)), header["transcript"]?.intValue == 1 else {
            throw Failure(line: 1, reason: "not a version 1 transcript's header")
        }
        var steps: [JSON] = []
        for (index, line) in lines.dropFirst().enumerated() {
            guard let step = try? JSON.parse(String(line)), case .object = step else {
                throw Failure(line: index + 2, reason: "not a JSON object")
            }
            steps.append(step)
        }
        var out = [
            "import Foundation",
            "import Testing",
            "import ViewlineKit",
            "import ViewlineTesting",
            "",
            "/// Written by `viewline --test-from` from session \(Self.comment(header["session"]?.stringValue ?? "?")), recorded on "
                + "\(Self.comment(header["server"]?.stringValue ?? "?")) at \(Self.comment(header["began"]?.stringValue ?? "?")).",
            "@Test func \(name)() async throws {",
            "    var services = Services()",
            "    // The services that are not backends (a store, a clock), as the recorded server had them.",
        ]
        if let reading = steps.lazy.compactMap({ $0["clock"]?.doubleValue }).first {
            out.append("    services.clock = TestClock(Date(timeIntervalSince1970: \(reading)))")
        }
        let appList = apps.isEmpty ? "/* your view-models: Todos.self, … */" : apps.map { "\($0).self" }.joined(separator: ", ")
        out.append("    let test = TestStore(apps: [\(appList)], services: services, answeringCalls: true)")
        if header["cut"]?.boolValue == true {
            out.append("    // The recording was cut at its bound: the session went on after the last step here.")
            out.append("    test.exhaustive = false")
        }
        var index = 0
        while index < steps.count {
            let step = steps[index]
            if let request = step["command"] {
                // Its reply is the next reply; what was recorded between them is the
                // command's own: its calls answered first, its events received after.
                let reply = steps[(index + 1)...].firstIndex { $0["reply"] != nil }
                let span = reply.map { steps[(index + 1)..<$0] } ?? []
                for inner in span where inner["answer"] != nil { out += answer(inner, calls: steps) }
                let masked = step["masked"]?.arrayValue?.compactMap(\.stringValue) ?? []
                out += send(request, masked: masked, reply: reply.map { steps[$0]["reply"] ?? .null })
                for inner in span { out += receive(inner) }
                index = (reply ?? index) + 1
                continue
            }
            if step["answer"] != nil {
                out += answer(step, calls: steps)
            } else {
                out += receive(step)
            }
            index += 1
        }
        out += ["    await test.finish()", "}", ""]
        return out.joined(separator: "\n")
    }

    private func send(_ request: JSON, masked: [String], reply: JSON?) -> [String] {
        var lines: [String] = []
        if !masked.isEmpty {
            lines.append("    // The recording masked \(Self.comment(masked.joined(separator: ", "))) (•••): write the secret in.")
        }
        let line = Self.literal(request)
        switch reply {
        case let reply? where reply["ok"] == false:
            let code = reply["error"]?["code"]?.stringValue ?? "internal_error"
            lines.append("    await test.send(\(line), fails: ErrorCode(rawValue: \(Self.string(code))))")
        case let reply?:
            lines.append("    await test.send(\(line), reply: \(Self.json(reply["result"] ?? .null)))")
        case nil:
            lines.append("    await test.send(\(line))  // recorded without its reply")
        }
        return lines
    }

    private func receive(_ step: JSON) -> [String] {
        guard let event = step["event"] else { return [] }  // clock readings and sleeps: the services'
        if event["type"] == "display", let view = event["view"]?.stringValue, let state = event["state"] {
            return ["    await test.receiveDisplay(\(Self.string(view)), state: \(Self.json(state)))"]
        }
        return ["    await test.receive(event: \(Self.json(event)))"]
    }

    private func answer(_ step: JSON, calls steps: [JSON]) -> [String] {
        guard let number = step["answer"]?.intValue else { return [] }
        let call = steps.first { $0["call"]?.intValue == number }
        let backend = Self.string(call?["backend"]?.stringValue ?? "?")
        let asked = call?["arguments"].map { ", asked: \(Self.json($0))" } ?? ""
        if let value = step["value"] {
            return ["    test.answer(call: \(number), \(backend)\(asked), value: \(Self.json(value)))"]
        }
        if let error = step["error"] {
            let message = Self.string(error["message"]?.stringValue ?? "")
            let thrown: String
            if let code = error["code"]?.stringValue {
                thrown = code == "cancelled" ? "CancellationError()" : "ProtocolError(ErrorCode(rawValue: \(Self.string(code))), \(message))"
            } else if let service = error["service"]?.stringValue {
                thrown = "ServiceError(\(Self.string(service)), \(message))"
            } else {
                let type = Self.comment(error["type"]?.stringValue ?? "?")
                return ["    // Call \(number) threw a \(type) (the recording kept only its type): throw one here."]
            }
            return ["    test.answer(call: \(number), \(backend)\(asked), throwing: \(thrown))"]
        }
        let type = Self.comment(step["unrecordable"]?.stringValue ?? "?")
        return [
            "    // Call \(number) answered a \(type), which the recording could not keep: answer it here.",
            "    // test.answer(call: \(number), \(backend), value: …)",
        ]
    }

    // MARK: - Swift literals

    /// `value` as a Swift expression: a JSON literal parsed at run time (a large
    /// nested dictionary literal would be slow to type-check).
    package static func json(_ value: JSON) -> String {
        switch value {
        case .null: ".null"
        case .bool(let flag): flag ? "true" : "false"
        case .int(let number): "\(number)"
        case .string(let text): string(text)
        default: "try JSON.parse(\(literal(value)))"
        }
    }

    /// `value`'s JSON text as a raw string literal (`#"…"#`), with enough `#`s that
    /// nothing in it ends the literal (`"#`) or starts an escape (`\#`).
    package static func literal(_ value: JSON) -> String {
        let text = value.encoded
        var hashes = "#"
        while text.contains("\"" + hashes) || text.contains("\\" + hashes) {
            hashes += "#"
        }
        return hashes + "\"" + text + "\"" + hashes
    }

    /// `text` as a Swift string literal.
    package static func string(_ text: String) -> String {
        var out = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\\": out += "\\\\"
            case "\"": out += "\\\""
            case "\n": out += "\\n"
            case "\r": out += "\\r"
            case "\t": out += "\\t"
            case _ where scalar.value < 0x20 || (0x7F...0x9F).contains(scalar.value):
                out += "\\u{\(String(scalar.value, radix: 16))}"
            default: out.unicodeScalars.append(scalar)
            }
        }
        return out + "\""
    }

    /// `text` fit for a `//` comment: one line, no control characters.
    package static func comment(_ text: String) -> String {
        String(String.UnicodeScalarView(text.unicodeScalars.map { $0.value < 0x20 || (0x7F...0x9F).contains($0.value) ? " " : $0 }))
    }
}
