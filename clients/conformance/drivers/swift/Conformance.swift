// The Swift client's conformance driver: runs one scenario's steps with
// `ViewlineClient` (clients/conformance/README.md has the protocol).
import Foundation
import ViewlineClient

struct StepFailed: Error, CustomStringConvertible {
    let description: String
    init(_ description: String) { self.description = description }
}

/// The scenarios' one rule: an object matches when each expected key matches, an
/// array when it has as many elements and each matches, anything else when equal.
func matches(_ expected: JSON, _ actual: JSON?) -> Bool {
    guard let actual else { return false }
    switch expected {
    case .object(let object):
        return object.pairs.allSatisfy { matches($0.value, actual[$0.key]) }
    case .array(let elements):
        guard case .array(let got) = actual, got.count == elements.count else { return false }
        return zip(elements, got).allSatisfy { matches($0, $1) }
    default:
        return expected == actual
    }
}

/// `{n}`: the repeat's count (1, 2, …); `{x:N}`: N letters x.
func expand(_ line: String, _ n: Int) -> String {
    var line = line.replacingOccurrences(of: "{n}", with: String(n))
    while let start = line.range(of: "{x:"), let end = line[start.upperBound...].firstIndex(of: "}") {
        let count = Int(line[start.upperBound..<end]) ?? 0
        line.replaceSubrange(start.lowerBound...end, with: String(repeating: "x", count: count))
    }
    return line
}

/// A command's outcome as the scenarios write it: `{ok, result}` or `{ok: false, error: code}`.
func outcome(_ call: () async throws -> JSON) async -> JSON {
    do {
        return ["ok": true, "result": try await call()]
    } catch let error as ViewlineError {
        return ["ok": false, "error": .string(error.code.rawValue)]
    } catch let error as Timeout {
        return ["ok": false, "error": "timeout", "message": .string(error.description)]
    } catch let error as ConnectionClosed {
        return ["ok": false, "error": "connection_closed", "message": .string(error.description)]
    } catch {
        return ["ok": false, "error": "protocol_error", "message": .string("\(error)")]
    }
}

/// An alert as its `alert` message, for matching.
func json(_ alert: Alert) -> JSON {
    var object: JSONObject = [
        "type": "alert", "id": .string(alert.id), "rev": .int(alert.rev), "title": .string(alert.title),
        "message": .string(alert.message),
        "actions": .array(alert.actions.map { ["role": .string($0.role), "label": .string($0.label)] }),
    ]
    if !alert.fields.isEmpty {
        object["fields"] = .array(alert.fields.map { ["name": .string($0.name), "label": .string($0.label), "secure": .bool($0.secure)] })
    }
    return .object(object)
}

/// One line to the runner, written straight to the descriptor: stdio's `fflush(nil)`
/// would wait for stdin's lock, which the reading thread holds while it waits.
func say(_ message: JSON) {
    FileHandle.standardOutput.write(Data((message.encoded + "\n").utf8))
}

/// Standard input's lines, read on a thread of their own (never on the pool the
/// client's tasks need).
final class Input: Sendable {
    let lines: AsyncStream<String>
    init() {
        let (lines, continuation) = AsyncStream.makeStream(of: String.self)
        self.lines = lines
        Thread.detachNewThread {
            while let line = readLine() { continuation.yield(line) }
            continuation.finish()
        }
    }
}

final class Driver {
    let setup: JSON
    var lines: AsyncStream<String>.Iterator
    var clients: [String: ViewlineClient] = [:]

    init(setup: JSON, lines: AsyncStream<String>.Iterator) {
        self.setup = setup
        self.lines = lines
    }

    func endpoints(_ via: String) -> [Endpoint] {
        (setup[via == "direct" ? "direct" : "nodes"]?.arrayValue ?? []).map {
            .tcp(host: $0["host"]?.stringValue ?? "127.0.0.1", port: $0["port"]?.intValue ?? 0)
        }
    }

    func client(_ step: JSON) throws -> ViewlineClient {
        let name = step["client"]?.stringValue ?? ""
        guard let client = clients[name] else { throw StepFailed("no client \(name) (connect it first)") }
        return client
    }

    func check(_ step: JSON, _ got: JSON) throws {
        let expected = step["expect"] ?? ["ok": true]
        if let code = expected["error"] {
            guard got["error"] == code else { throw StepFailed("expected error \(code.encoded), got \(got.encoded)") }
        } else if !matches(expected, got) {
            throw StepFailed("expected \(expected.encoded), got \(got.encoded)")
        }
    }

    func run(_ step: JSON) async throws {
        let op = step["op"]?.stringValue ?? ""
        if op.hasPrefix("wait_"), let expected = step["expect_error"]?.stringValue {
            do {
                try await act(step)
            } catch let failure as StepFailed where expected == "timeout" && failure.description.contains("timed out") {
                return
            }
            throw StepFailed("expected the wait to end with \(expected)")
        }
        try await act(step)
    }

    func act(_ step: JSON) async throws {
        let op = step["op"]?.stringValue ?? ""
        let timeout = Duration.milliseconds(step["timeout_ms"]?.intValue ?? 10_000)
        switch op {
        case "connect":
            let all = endpoints(step["via"]?.stringValue ?? "proxy")
            let target = all[step["node"]?.intValue ?? 0]
            var options = ViewlineClient.Options(
                timeout: timeout, reconnect: step["reconnect"]?.boolValue ?? true, nodes: all.filter { $0 != target })
            options.backoff = { round in .milliseconds(min(1000, 100 << min(round, 4))) }
            clients[step["client"]?.stringValue ?? ""] = try await ViewlineClient.connect(to: target, options: options)
        case "send":
            let client = try client(step)
            var got: JSON = ["ok": true]
            for n in 1...max(1, step["repeat"]?.intValue ?? 1) {
                let line = expand(step["line"]?.stringValue ?? "", n)
                got = await outcome { try await client.send(line, timeout: timeout) }
                if got["ok"] == false, step["expect"]?["error"] == nil { break }
            }
            try check(step, got)
        case "attach":
            let client = try client(step)
            guard let owner = clients[step["to"]?.stringValue ?? ""] else { throw StepFailed("no client \(step["to"] ?? .null)") }
            let token = await owner.token
            try check(step, await outcome { try await client.attach(token: token, timeout: timeout) })
        case "confirm":
            let client = try client(step)
            var fields: [String: String] = [:]
            for (key, value) in step["fields"]?.objectValue?.pairs ?? [] { fields[key] = value.stringValue }
            try check(step, await outcome { try await client.confirm(fields: fields) })  // (its timeout: the client's, from connect)
        case "cancel":
            let client = try client(step)
            try check(step, await outcome { try await client.cancel() })
        case "wait_display":
            let view = step["view"]?.stringValue ?? ""
            let condition = step["where"] ?? [:]
            do {
                try await client(step).waitForDisplay(view, timeout: timeout) { matches(condition, $0) }
            } catch is Timeout {
                throw StepFailed("no display of \(view) matching \(condition.encoded): timed out")
            } catch let error as ConnectionClosed {
                throw StepFailed("no display of \(view) matching \(condition.encoded): \(error)")
            }
        case "wait_alert":
            let alert: Alert
            do {
                alert = try await client(step).waitForAlert(timeout: timeout)
            } catch is Timeout {
                throw StepFailed("no alert: timed out")
            } catch let error as ConnectionClosed {
                throw StepFailed("no alert: \(error)")
            }
            let expected = step["expect"] ?? [:]
            if !matches(expected, json(alert)) { throw StepFailed("the alert \(json(alert).encoded) does not match \(expected.encoded)") }
        case "wait_dismiss":
            do {
                try await client(step).waitForEvent(timeout: timeout) { if case .dismiss = $0 { true } else { false } }
            } catch is Timeout {
                throw StepFailed("no dismiss: timed out")
            }
        case "wait_closed":
            let client = try client(step)
            let closed = try await within(timeout) {
                while true {
                    if case .disconnected = await client.connection { return true }
                    try await Task.sleep(for: .milliseconds(20))
                }
            }
            if closed != true { throw StepFailed("the client is still open") }
            let code = await client.bye?.code.rawValue
            if code != step["bye"]?.stringValue { throw StepFailed("expected bye \(step["bye"] ?? .null), got \(code ?? "none")") }
        case "expect_alert":
            let presented = try await client(step).presentedAlert
            let expected = step["alert"] ?? .null
            if expected == .null {
                if let presented { throw StepFailed("an alert is still presented: \(json(presented).encoded)") }
            } else if presented.map({ !matches(expected, json($0)) }) ?? true {
                throw StepFailed("presented \((presented.map(json) ?? .null).encoded), expected \(expected.encoded)")
            }
        case "expect_view":
            let view = step["view"]?.stringValue ?? ""
            let state = try await client(step).views[view]
            if !matches(step["where"] ?? [:], state) { throw StepFailed("\(view) is \((state ?? .null).encoded), expected \((step["where"] ?? .null).encoded)") }
        case "expect_client":
            let resumed = try await client(step).resumed
            if resumed < step["resumed_at_least"]?.intValue ?? 0 || resumed > step["resumed_at_most"]?.intValue ?? resumed {
                throw StepFailed("resumed \(resumed) times")
            }
        case "sleep":
            try await Task.sleep(for: .milliseconds(step["ms"]?.intValue ?? 0))
        case "control":
            say(JSON.object(["control": step]))
            guard let line = await lines.next(), let answer = try? JSON.parse(line) else { throw StepFailed("the runner did not answer") }
            if answer["done"] != true { throw StepFailed("the runner could not do it: \(answer["error"] ?? .null)") }
        default:
            throw StepFailed("unknown op \(op)")
        }
    }

    /// `work`'s value, or `nil` once `limit` has passed.
    func within<T: Sendable>(_ limit: Duration, _ work: @escaping @Sendable () async throws -> T) async throws -> T? {
        try await withThrowingTaskGroup(of: T?.self) { group in
            group.addTask { try await work() }
            group.addTask {
                try await Task.sleep(for: limit)
                return nil
            }
            let first = try await group.next() ?? nil
            group.cancelAll()
            return first
        }
    }
}

@main
enum Conformance {
    static func main() async {
        let input = Input()
        var iterator = input.lines.makeAsyncIterator()
        guard let first = await iterator.next(), let setup = try? JSON.parse(first) else {
            say(["pass": false, "message": "no scenario on standard input"])
            exit(2)
        }
        let driver = Driver(setup: setup, lines: iterator)
        var result: JSON = ["pass": true]
        for (index, step) in (setup["scenario"]?["steps"]?.arrayValue ?? []).enumerated() {
            FileHandle.standardError.write(Data("step \(index): \(step.encoded)\n".utf8))  // the driver's log
            do {
                try await driver.run(step)
            } catch {
                result = ["pass": false, "step": .int(index), "op": step["op"] ?? .null, "message": .string("\(error)")]
                break
            }
        }
        for client in driver.clients.values { await client.close() }
        say(result)
        exit(result["pass"] == true ? 0 : 1)
    }
}
