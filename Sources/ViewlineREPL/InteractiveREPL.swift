import CEditLineShim
import ViewlineClient

#if canImport(Glibc)
    import Glibc
#endif

/// The interactive REPL on libedit: line editing, history, Tab completion, and
/// events printed above the prompt while the user types.
///
/// libedit calls back into plain C function pointers, so the one running REPL is
/// reachable through a global; there is only ever one per process.
public final class InteractiveREPL {
    /// The session's client: connection, resume, `moved` and resending are its job.
    var bridge: ClientBridge
    /// Where a fresh session starts when the old one cannot be resumed (it expired).
    let endpoint: Endpoint
    let options: ViewlineClient.Options
    /// A session to join at start (`--attach`).
    let attachToken: String?
    var renderer: EventRenderer
    let raw: Bool
    let historyPath: String?
    var client = ClientSession()
    private var feed = ServerFeed()
    private var editLine: OpaquePointer?
    private var history: OpaquePointer?
    private var editing = false
    /// The client closed (the session ended, or could not be resumed).
    private var serverClosed = false
    private var promptBuffer: UnsafeMutablePointer<CChar>?

    /// - Parameters:
    ///   - bridge: the connected client (``connect(to:options:)``).
    ///   - endpoint, options: where and how it connected: a fresh session starts
    ///     there when the old one is gone.
    public init(
        bridge: ClientBridge, endpoint: Endpoint, options: ViewlineClient.Options, renderer: EventRenderer, raw: Bool,
        historyPath: String?, attachToken: String? = nil
    ) {
        self.bridge = bridge
        self.endpoint = endpoint
        self.options = options
        self.attachToken = attachToken
        self.renderer = renderer
        self.raw = raw
        self.historyPath = historyPath
    }

    /// A client for the REPL: connects to `endpoint` and starts a session.
    public static func connect(to endpoint: Endpoint, options: ViewlineClient.Options) throws -> ClientBridge {
        try ClientBridge.connect(to: endpoint, options: options)
    }

    public func run() -> Int32 {
        let welcome = (try? bridge.run { await $0.welcome }) ?? .null
        client.observe(welcome)
        show(welcome)
        if let attachToken {
            do {
                _ = try bridge.run { try await $0.attach(token: attachToken) }
                client.token = attachToken
            } catch {
                drain()
                print(renderer.style.red(TerminalText.clean("error \((error as? ViewlineError)?.code.rawValue ?? "?"): \(error)")))
                return 1
            }
            drain()
        }
        fetchCommandNames()

        REPLCallbacks.active = self
        installInterruptHandler()
        guard let el = vl_el_open("viewline") else {
            FileHandleOutput.standardError("viewline: cannot initialise libedit\n")
            return 1
        }
        editLine = el
        history = vl_history_open(1000)
        if let history {
            if let historyPath { _ = vl_history_load(history, historyPath) }
            vl_el_set_history(el, history)
        }
        updatePrompt()
        vl_el_set_prompt(el, REPLCallbacks.prompt)
        vl_el_set_getc(el, REPLCallbacks.getc)
        vl_el_set_completion(el, REPLCallbacks.complete)
        defer {
            vl_el_close(el)
            if let history { vl_history_close(history) }
            REPLCallbacks.active = nil
        }

        while true {
            if serverClosed {
                guard !client.ended, startOver() else { break }
                serverClosed = false
            }
            drain()
            updatePrompt()
            var count: Int32 = 0
            editing = true
            let raw = el_gets(el, &count)
            editing = false
            guard let raw, count > 0 else {
                if serverClosed { continue }  // the client closed while typing: start over, then prompt again
                print("")
                break
            }
            let line = String(cString: raw).trimmingCharacters(in: " \t\r\n")
            if line.isEmpty { continue }
            if let history {
                vl_history_add(history, line)
                if let historyPath { _ = vl_history_save(history, historyPath) }
            }
            if line.lowercased() == "token" {
                let token = client.token ?? "?"
                print(
                    renderer.style.dim(
                        TerminalText.clean(
                            "session \(client.session ?? "?"), token \(token); join it from another terminal with: viewline --attach \(token)")))
                continue
            }
            if ["exit", "quit"].contains(line.lowercased()) {
                perform("quit", typed: line)
                while !serverClosed { drain(waiting: true) }
                return 0
            }
            perform(translate(line), typed: line)
        }
        if serverClosed { print(renderer.style.dim("connection closed by the server")) }
        return 0
    }

    /// Sends a typed command and shows its reply where it comes among the events. The
    /// client resends a command the server did not answer before a `bye` that leaves
    /// the session alive (it never ran, PROTOCOL §4); one whose reply was lost with a
    /// connection that dropped without a `bye` is reported.
    private func perform(_ wire: String, typed line: String) {
        feed.await(bridge.send(wire))
        while feed.awaiting != nil && !serverClosed { drain(waiting: true) }
    }

    /// The client could not resume the session (it expired, or is gone from every
    /// node): carry on in a fresh one. Returns false when no server answers.
    func startOver() -> Bool {
        // The node first connected to, then the cluster's others (`--nodes`).
        let candidates = [endpoint] + options.nodes.filter { $0 != endpoint }
        guard let fresh = candidates.lazy.compactMap({ try? Self.connect(to: $0, options: self.options) }).first else {
            print(renderer.style.dim("could not reconnect to \(endpoint)"))
            return false
        }
        bridge = fresh
        feed = ServerFeed()
        client.presentedAlert = nil
        client.observe((try? fresh.run { await $0.welcome }) ?? .null)
        print(renderer.style.dim(TerminalText.clean("the session expired; this is a new session, \(client.session ?? "?")")))
        return true
    }

    /// Shows what the client heard (blocking until something comes when `waiting`).
    private func drain(waiting: Bool = false) {
        if waiting { bridge.waitForItems() }
        feed.append(bridge.take())
        while let output = feed.next() { handle(output) }
    }

    private func handle(_ output: ServerFeed.Output) {
        switch output {
        case .message(let message):
            client.observe(message)
            show(message)
        case .ownReply(let reply):
            // The client's own requests: its resume's `attach` (and the `moved` it follows).
            if reply["ok"] == true, let result = reply["result"], result["snapshot"] != nil {
                client.session = result["session"]?.stringValue ?? client.session
                client.presentedAlert = nil
                let replayed = result["replayed"]?.intValue ?? 0
                let how = result["snapshot"] == true ? "its current state follows" : "\(replayed) missed event\(replayed == 1 ? "" : "s") follow"
                say("attached to session \(client.session ?? "?"); \(how)")
            } else if reply["error"]?["code"] == "moved", let address = reply["error"]?["address"]?.stringValue {
                say("the session lives on \(address); following it there")
            }
        case .connection(.reconnecting):
            say("connection lost; reconnecting…")
        case .connection:
            break
        case .unanswered(let error):
            if error is ConnectionClosed, !serverClosed {
                say("(the reply was lost with the connection; the command may or may not have run)")
            } else {
                say("(no reply: \(error))")
            }
        case .finished:
            serverClosed = true
        }
    }

    /// `y`, `n` or an action's label answer the presented alert; its fields are asked one by one.
    func translate(_ line: String) -> String {
        let lowered = line.lowercased()
        guard let alert = client.presentedAlert,
            let role = client.alertRole(for: line) ?? (lowered == "confirm" ? "confirm" : nil)
        else { return line }
        let id = alert["id"] ?? .null
        var args: JSONObject = ["alert": id]
        let fields = alert["fields"]?.arrayValue ?? []
        if role == "confirm" && !fields.isEmpty {
            var values = JSONObject()
            for field in fields {
                let name = field["name"]?.stringValue ?? ""
                let label = field["label"]?.stringValue ?? name
                values[name] = .string(Self.askField(label, secure: field["secure"]?.boolValue == true))
            }
            args["fields"] = .object(values)
        }
        return JSON.object(["cmd": .string(role), "args": .object(args)]).encoded
    }

    /// Reads one field's value from the terminal; secure fields without echo.
    static func askField(_ label: String, secure: Bool) -> String {
        var saved = termios()
        let isTerminal = tcgetattr(0, &saved) == 0
        if secure && isTerminal {
            // Echo goes off before the prompt shows, so nothing typed can slip through.
            var quiet = saved
            quiet.c_lflag &= ~tcflag_t(ECHO)
            tcsetattr(0, TCSANOW, &quiet)
        }
        print("\(TerminalText.clean(label)): ", terminator: "")
        fflush(nil)
        var bytes: [UInt8] = []
        var byte: UInt8 = 0
        while read(0, &byte, 1) == 1 && byte != 0x0A { bytes.append(byte) }
        if secure && isTerminal {
            tcsetattr(0, TCSANOW, &saved)
            print("")
        }
        return String(decoding: bytes, as: UTF8.self).trimmingCharacters(in: "\r")
    }

    /// Asks for the command list quietly, for Tab completion.
    private func fetchCommandNames() {
        guard let help = try? bridge.run({ try await $0.send("help", arguments: [:]) }) else { return }
        client.observe(["type": "reply", "ok": true, "result": help])
        renderer.learn(help: help)
    }

    private func say(_ text: String) {
        output(renderer.style.dim(TerminalText.clean(text)))
    }

    private func show(_ message: JSON) {
        let text: String?
        if raw {
            text = message.encodedForTerminal
        } else {
            renderer.width = TerminalWidth.current()
            text = renderer.render(message)
        }
        guard let text else { return }
        output(text)
    }

    private func output(_ text: String) {
        if editing, let editLine {
            // Clear the half-typed line, print above it, and let libedit redraw it intact.
            print("\r\u{1B}[K" + text)
            fflush(nil)
            updatePrompt()
            vl_el_refresh(editLine)
        } else {
            print(text)
            fflush(nil)
        }
    }

    private func updatePrompt() {
        let prompt = client.presentedAlert != nil ? "viewline [y/n]> " : "viewline> "
        promptBuffer?.deallocate()
        let bytes = Array(prompt.utf8CString)
        let buffer = UnsafeMutablePointer<CChar>.allocate(capacity: bytes.count)
        buffer.initialize(from: bytes, count: bytes.count)
        promptBuffer = buffer
    }

    // MARK: - libedit callbacks

    fileprivate var prompt: UnsafeMutablePointer<CChar>? { promptBuffer }

    /// libedit's read function: waits on the keyboard and the server at once.
    fileprivate func readCharacter(_ out: UnsafeMutablePointer<wchar_t>?) -> Int32 {
        while true {
            if REPLCallbacks.interrupted != 0 {
                REPLCallbacks.interrupted = 0
                out?.pointee = 0x15  // ^U: kill the whole line (Ctrl-C clears it)
                return 1
            }
            var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0), pollfd(fd: bridge.fd, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return -1
            }
            if fds[1].revents != 0 {
                drain()
                if serverClosed {
                    print("\r\u{1B}[K", terminator: "")
                    return 0
                }
                continue
            }
            if fds[0].revents != 0 {
                var first: UInt8 = 0
                let count = read(0, &first, 1)
                if count < 0 && errno == EINTR { continue }
                if count <= 0 { return 0 }
                if first == 0x03 {  // Ctrl-C arriving as a character
                    out?.pointee = 0x15
                    return 1
                }
                out?.pointee = wchar_t(Self.decodeUTF8(first))
                return 1
            }
        }
    }

    /// Completes the first word from the server's command names.
    fileprivate func complete() -> UInt8 {
        guard let editLine else { return 6 }
        var buffer = [CChar](repeating: 0, count: 1024)
        let length = vl_el_text_before_cursor(editLine, &buffer, buffer.count)
        let typed = String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self)
        if typed.contains(" ") {
            // After the command: a view or command name where one goes (`state se` →
            // `state search`), else what the command takes, from `help`'s declarations.
            if let candidates = client.argumentCompletions(for: typed), !candidates.isEmpty {
                let word = String(typed.split(separator: " ", omittingEmptySubsequences: false).last ?? "")
                if candidates.count == 1 {
                    el_insertstr(editLine, String(candidates[0].dropFirst(word.count)) + " ")
                    return 4  // CC_REFRESH
                }
                print("\n" + candidates.joined(separator: "  "))
                return 8  // CC_REDISPLAY
            }
            guard let hint = client.argumentHint(for: typed) else { return 6 }  // CC_ERROR
            print("\n" + hint)
            return 8
        }
        let candidates = client.completions(for: typed)
        guard !candidates.isEmpty else { return 6 }
        if candidates.count == 1 {
            let rest = String(candidates[0].dropFirst(typed.count)) + " "
            el_insertstr(editLine, rest)
            return 4  // CC_REFRESH
        }
        var common = candidates[0]
        for candidate in candidates.dropFirst() {
            while !candidate.hasPrefix(common) { common.removeLast() }
        }
        if common.count > typed.count {
            el_insertstr(editLine, String(common.dropFirst(typed.count)))
            return 4
        }
        print("\n" + candidates.joined(separator: "  "))
        return 8  // CC_REDISPLAY
    }

    /// Reads the continuation bytes of a UTF-8 sequence from standard input.
    static func decodeUTF8(_ first: UInt8) -> UInt32 {
        let extra: Int
        var value: UInt32
        switch first {
        case 0..<0x80: return UInt32(first)
        case 0xC0..<0xE0: extra = 1; value = UInt32(first & 0x1F)
        case 0xE0..<0xF0: extra = 2; value = UInt32(first & 0x0F)
        case 0xF0..<0xF8: extra = 3; value = UInt32(first & 0x07)
        default: return 0xFFFD
        }
        for _ in 0..<extra {
            var next: UInt8 = 0
            guard read(0, &next, 1) == 1, next & 0xC0 == 0x80 else { return 0xFFFD }
            value = value << 6 | UInt32(next & 0x3F)
        }
        return value
    }

    private func installInterruptHandler() {
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in REPLCallbacks.interrupted = 1 }
        sigemptyset(&action.sa_mask)
        action.sa_flags = 0  // no SA_RESTART: poll() must wake up
        sigaction(SIGINT, &action, nil)
        // A parent may have started us with SIGINT blocked; Ctrl-C must reach us.
        var unblock = sigset_t()
        sigemptyset(&unblock)
        sigaddset(&unblock, SIGINT)
        pthread_sigmask(SIG_UNBLOCK, &unblock, nil)
    }
}

/// The C entry points libedit calls; they forward to the running REPL.
enum REPLCallbacks {
    nonisolated(unsafe) static var active: InteractiveREPL?
    nonisolated(unsafe) static var interrupted: sig_atomic_t = 0

    static let prompt: vl_prompt_fn = { _ in active?.prompt }
    static let getc: vl_getc_fn = { _, out in active?.readCharacter(out) ?? 0 }
    static let complete: vl_command_fn = { _, _ in active?.complete() ?? 6 }
}
