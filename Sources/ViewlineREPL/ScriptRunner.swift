import ViewlineProtocol

#if canImport(Glibc)
import Glibc
#endif

/// Runs commands from a non-terminal standard input: one line at a time, waiting
/// for each reply and printing events as they come. Exit status 0 when every
/// command succeeded, 1 otherwise. `#` starts a comment line.
public struct ScriptRunner {
    let connection: ServerConnection
    var renderer: EventRenderer
    let raw: Bool
    var client = ClientSession()

    public init(connection: ServerConnection, renderer: EventRenderer, raw: Bool) {
        self.connection = connection
        self.renderer = renderer
        self.raw = raw
    }

    public mutating func run() -> Int32 {
        guard let welcome = connection.readLine() else {
            printError("the server closed the connection")
            return 1
        }
        show(welcome)
        var failed = false
        while let line = Swift.readLine(strippingNewline: true) {
            let trimmed = line.trimmingCharacters(in: " \t\r")
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            drainAvailable()
            if !raw { print(renderer.style.dim("› \(trimmed)")) }
            do {
                try connection.send(trimmed)
            } catch {
                printError("\(error)")
                return 1
            }
            guard let reply = awaitReply(printReply: true) else {
                printError("the server closed the connection")
                return 1
            }
            if reply["ok"]?.boolValue != true { failed = true }
            if trimmed.lowercased() == "quit" {
                drainUntilClosed()
                return failed ? 1 : 0
            }
        }
        // Let background work finish so its events are printed before exiting.
        if (try? connection.send("{\"id\":\"_eof\",\"cmd\":\"wait\"}")) != nil {
            _ = awaitReply(printReply: false)
        }
        return failed ? 1 : 0
    }

    /// Prints everything up to and including the next reply, which it returns.
    mutating func awaitReply(printReply: Bool) -> JSON? {
        while let line = connection.readLine() {
            guard let message = try? JSON.parse(line) else {
                print(line)
                continue
            }
            client.observe(message)
            if message["type"]?.stringValue == "reply" {
                if printReply { show(line, message) }
                return message
            }
            show(line, message)
        }
        return nil
    }

    /// Prints events that already arrived, so they appear before the next command.
    mutating func drainAvailable() {
        while true {
            while let line = connection.bufferedLine() {
                let message = try? JSON.parse(line)
                if let message { client.observe(message) }
                show(line, message)
            }
            var fd = pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)
            guard poll(&fd, 1, 0) > 0, connection.fill() else { return }
        }
    }

    mutating func drainUntilClosed() {
        while let line = connection.readLine() { show(line) }
    }

    mutating func show(_ line: String, _ parsed: JSON? = nil) {
        if raw {
            print(line)
        } else if let message = parsed ?? (try? JSON.parse(line)), let text = renderer.render(message) {
            print(text)
        }
        fflush(nil)
    }

    func printError(_ text: String) {
        FileHandleOutput.standardError("viewline: \(text)\n")
    }
}

enum FileHandleOutput {
    static func standardError(_ text: String) {
        var bytes = Array(text.utf8)
        _ = bytes.withUnsafeMutableBytes { write(2, $0.baseAddress, $0.count) }
    }
}

extension String {
    /// Trims the given scalars (scalars, not characters: "\r\n" is one Character).
    func trimmingCharacters(in set: String) -> String {
        let scalars = Set(set.unicodeScalars)
        var s = Substring(self).unicodeScalars
        while let f = s.first, scalars.contains(f) { s.removeFirst() }
        while let l = s.last, scalars.contains(l) { s.removeLast() }
        return String(String.UnicodeScalarView(s))
    }
}
