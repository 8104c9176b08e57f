import ViewlineClient

#if canImport(Glibc)
    import Glibc
#endif

/// Runs commands from a non-terminal standard input: one line at a time, waiting
/// for each reply and printing events as they come. Exit status 0 when every
/// command succeeded, 1 otherwise. `#` starts a comment line.
public struct ScriptRunner {
    let bridge: ClientBridge
    var renderer: EventRenderer
    let raw: Bool
    var client = ClientSession()
    private var feed = ServerFeed()
    private var closed = false

    /// - Parameter bridge: the connected client (``InteractiveREPL/connect(to:options:)``).
    public init(bridge: ClientBridge, renderer: EventRenderer, raw: Bool) {
        self.bridge = bridge
        self.renderer = renderer
        self.raw = raw
    }

    public mutating func run() -> Int32 {
        let welcome = (try? bridge.run { await $0.welcome }) ?? .null
        client.observe(welcome)
        show(welcome)
        // What the views are drawn with (busy flags, paging commands, their order),
        // asked quietly as the interactive REPL does.
        if !raw, let help = perform("help", printReply: false)?["result"] { renderer.learn(help: help) }
        var failed = false
        while let line = Swift.readLine(strippingNewline: true) {
            let trimmed = line.trimmingCharacters(in: " \t\r")
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            drain()
            if !raw { print(renderer.style.dim("› \(trimmed)")) }
            guard let reply = perform(trimmed, printReply: true) else {
                printError(closed ? "the server closed the connection" : "the reply was lost with the connection")
                return 1
            }
            if reply["ok"]?.boolValue != true { failed = true }
            if trimmed.lowercased() == "quit" {
                while !closed { drain(waiting: true) }
                return failed ? 1 : 0
            }
        }
        // Let background work finish so its events are printed before exiting.
        _ = perform("wait", printReply: false)
        return failed ? 1 : 0
    }

    /// Sends a line and prints everything up to and including its reply, which it
    /// returns (`nil` when none came).
    mutating func perform(_ line: String, printReply: Bool) -> JSON? {
        feed.await(bridge.send(line))
        while !closed {
            bridge.waitForItems()
            feed.append(bridge.take())
            while let output = feed.next() {
                switch output {
                case .message(let message):
                    client.observe(message)
                    let isReply = message["type"] == "reply"
                    if !isReply || printReply { show(message) }
                    if isReply && feed.awaiting == nil { return message }
                case .unanswered:
                    return nil
                case .finished:
                    closed = true
                case .ownReply, .connection:
                    break
                }
            }
        }
        return nil
    }

    /// Prints what already arrived, so it appears before the next command.
    mutating func drain(waiting: Bool = false) {
        if waiting { bridge.waitForItems() }
        feed.append(bridge.take())
        while let output = feed.next() {
            switch output {
            case .message(let message):
                client.observe(message)
                show(message)
            case .finished:
                closed = true
            case .ownReply, .connection, .unanswered:
                break
            }
        }
    }

    mutating func show(_ message: JSON) {
        if raw {
            print(message.encodedForTerminal)
        } else if let text = renderer.render(message) {
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
