import CEditLineShim
import ViewlineProtocol

#if canImport(Glibc)
import Glibc
#endif

/// The interactive REPL on libedit: line editing, history, Tab completion, and
/// events printed above the prompt while the user types.
///
/// libedit calls back into plain C function pointers, so the one running REPL is
/// reachable through a global; there is only ever one per process.
public final class InteractiveREPL {
    var connection: ServerConnection
    /// Where to reconnect to when the connection drops (the node a `moved` sent us to, once followed).
    var address: (host: String, port: Int)?
    /// Other nodes of a cluster to try when ``address`` does not answer (`--nodes`).
    let otherNodes: [(host: String, port: Int)]
    let tls: ServerConnection.TLS?
    /// A session to join at start (`--attach`).
    let attachToken: String?
    var renderer: EventRenderer
    let raw: Bool
    let historyPath: String?
    var client = ClientSession()
    private var editLine: OpaquePointer?
    private var history: OpaquePointer?
    private var editing = false
    private var serverClosed = false
    /// The server said `bye` on the current connection.
    private var sawBye = false
    private var promptBuffer: UnsafeMutablePointer<CChar>?

    public init(
        connection: ServerConnection, renderer: EventRenderer, raw: Bool, historyPath: String?,
        address: (host: String, port: Int)? = nil, tls: ServerConnection.TLS? = nil, attachToken: String? = nil,
        otherNodes: [(host: String, port: Int)] = []
    ) {
        self.connection = connection
        self.address = address
        self.otherNodes = otherNodes
        self.tls = tls
        self.attachToken = attachToken
        self.renderer = renderer
        self.raw = raw
        self.historyPath = historyPath
    }

    public func run() -> Int32 {
        guard let welcome = connection.readLine() else {
            FileHandleOutput.standardError("viewline: the server closed the connection\n")
            return 1
        }
        if let message = try? JSON.parse(welcome) { client.observe(message) }
        show(welcome)
        if let attachToken {
            guard attach(attachToken, lastRev: nil) == .attached else { return 1 }
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
                guard !client.ended, resume() else { break }
                serverClosed = false
            }
            drainBuffered()
            updatePrompt()
            var count: Int32 = 0
            editing = true
            let raw = el_gets(el, &count)
            editing = false
            guard let raw, count > 0 else {
                if serverClosed { continue }  // dropped while typing: resume, then prompt again
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
                print(renderer.style.dim("session \(client.session ?? "?"), token \(token); join it from another terminal with: viewline --attach \(token)"))
                continue
            }
            if ["exit", "quit"].contains(line.lowercased()) {
                _ = try? connection.send("quit")
                while let next = connection.readLine() { show(next) }
                return 0
            }
            guard perform(translate(line), typed: line) else { break }
        }
        if serverClosed { print(renderer.style.dim("connection closed by the server")) }
        return 0
    }

    /// Sends a typed command and shows its reply. A command the server did not answer
    /// before a `bye` that leaves the session alive never ran (PROTOCOL §4), nor did a
    /// line that could not be written: it goes out again on the resumed connection.
    /// Returns false when the REPL should stop.
    private func perform(_ wire: String, typed line: String) -> Bool {
        for _ in 0..<3 {
            sawBye = false
            var sent = true
            do { try connection.send(wire) } catch {
                serverClosed = true
                sent = false
            }
            if sent, awaitReply() != nil { return true }
            guard serverClosed, !client.ended else { return false }
            if sent && !sawBye {
                print(renderer.style.dim("(the reply to \"\(line)\" was lost with the connection; it may or may not have run)"))
                return true  // the loop resumes the session before the next prompt
            }
            guard resume() else { return false }
            serverClosed = false
            print(renderer.style.dim("(\"\(line)\" had not run: sent again)"))
        }
        return true
    }

    /// The connection dropped: reconnect with backoff and attach to the same session
    /// from the last `rev` shown, so nothing is missed (the presented alert shows
    /// again). Returns false when the server cannot be reached.
    func resume() -> Bool {
        guard let first = address, let token = client.token else { return false }
        print(renderer.style.dim("connection lost; reconnecting…"))
        // The same node first, then the cluster's other nodes (one of them restores the
        // session if its node died).
        let candidates = [first] + otherNodes.filter { $0 != first }
        var delay: useconds_t = 200_000
        for attempt in 0..<12 {
            let target = candidates[attempt % candidates.count]
            if let fresh = try? ServerConnection(host: target.host, port: target.port, tls: tls),
                let line = fresh.readLine(), let welcome = try? JSON.parse(line), welcome["type"] == "welcome"
            {
                connection = fresh
                address = target
                switch attach(token, lastRev: client.rev) {
                case .attached: return true
                case .notAttached(code: "unavailable"), .notAttached(code: "moved"):
                    // The node cannot reach the database yet, or the session's dead node
                    // still counts as alive (its heartbeat has not expired): try again.
                    break
                case .notAttached:
                    // The session is gone (expired): carry on in the fresh one.
                    client.observe(welcome)
                    print(renderer.style.dim("the session expired; this is a new session, \(client.session ?? "?")"))
                    return true
                }
            }
            if attempt % candidates.count == candidates.count - 1 {
                usleep(delay)
                delay = min(delay * 2, 5_000_000)
            }
        }
        print(renderer.style.dim("could not reconnect to \(first.host):\(first.port)"))
        return false
    }

    enum AttachOutcome: Equatable {
        case attached
        case notAttached(code: String?)
    }

    /// Sends `attach` and reads its reply; the events after it flow as usual. A
    /// `moved` reply (the session lives on another node of a cluster) is followed:
    /// connect there and attach again.
    @discardableResult
    private func attach(_ token: String, lastRev: Int?, hops: Int = 0) -> AttachOutcome {
        var args: JSONObject = ["token": .string(token)]
        if let lastRev { args["lastRev"] = .int(lastRev) }
        guard (try? connection.send(JSON.object(["id": "_attach", "cmd": "attach", "args": .object(args)]).encoded)) != nil else {
            return .notAttached(code: nil)
        }
        while let line = connection.readLine() {
            guard let reply = try? JSON.parse(line), reply["type"] == "reply", reply["re"] == "_attach" else { continue }
            guard reply["ok"] == true, let result = reply["result"] else {
                let code = reply["error"]?["code"]?.stringValue
                if code == "moved", hops < 3, let target = reply["error"]?["address"]?.stringValue.flatMap(Self.parseAddress),
                    let fresh = try? ServerConnection(host: target.host, port: target.port, tls: tls),
                    let welcome = fresh.readLine(), (try? JSON.parse(welcome))?["type"] == "welcome"
                {
                    print(renderer.style.dim("the session lives on \(target.host):\(target.port); following it there"))
                    connection = fresh
                    address = target
                    return attach(token, lastRev: lastRev, hops: hops + 1)
                }
                print(renderer.style.red("error \(code ?? "?"): \(reply["error"]?["message"]?.stringValue ?? "")"))
                return .notAttached(code: code)
            }
            client.token = token
            client.session = result["session"]?.stringValue
            let replayed = result["replayed"]?.intValue ?? 0
            let how = result["snapshot"] == true ? "its current state follows" : "\(replayed) missed event\(replayed == 1 ? "" : "s") follow"
            print(renderer.style.dim("attached to session \(client.session ?? "?"); \(how)"))
            return .attached
        }
        return .notAttached(code: nil)
    }

    /// `host:port` (or `[v6]:port`), as `moved` and `--nodes` give it.
    public static func parseAddress(_ text: String) -> (host: String, port: Int)? {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (1...65535).contains(port) else {
            return nil
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        return host.isEmpty ? nil : (host, port)
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
        print("\(label): ", terminator: "")
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
        guard (try? connection.send("{\"id\":\"_help\",\"cmd\":\"help\"}")) != nil else { return }
        while let line = connection.readLine() {
            guard let message = try? JSON.parse(line) else { continue }
            client.observe(message)
            if message["type"]?.stringValue == "reply" {
                for view in message["result"]?["views"]?.arrayValue ?? [] {
                    if let name = view["name"]?.stringValue, let busy = view["busy"]?.arrayValue {
                        renderer.busyFields[name] = Set(busy.compactMap(\.stringValue))
                    }
                }
                return
            }
            show(line, message)
        }
    }

    private func awaitReply() -> JSON? {
        while true {
            if let line = connection.bufferedLine() {
                if let reply = handle(line), reply["type"]?.stringValue == "reply" { return reply }
                continue
            }
            if !connection.fill() {
                serverClosed = true
                return nil
            }
        }
    }

    private func drainBuffered() {
        while let line = connection.bufferedLine() { _ = handle(line) }
    }

    @discardableResult
    private func handle(_ line: String) -> JSON? {
        let message = try? JSON.parse(line)
        if let message { client.observe(message) }
        if message?["type"] == "bye" { sawBye = true }
        show(line, message)
        return message
    }

    private func show(_ line: String, _ parsed: JSON? = nil) {
        let text: String?
        if raw {
            text = line
        } else {
            renderer.width = TerminalWidth.current()
            text = (parsed ?? (try? JSON.parse(line))).flatMap { renderer.render($0) }
        }
        guard let text else { return }
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
            var fds = [pollfd(fd: 0, events: Int16(POLLIN), revents: 0), pollfd(fd: connection.fd, events: Int16(POLLIN), revents: 0)]
            let ready = poll(&fds, 2, -1)
            if ready < 0 {
                if errno == EINTR { continue }
                return -1
            }
            if fds[1].revents != 0 {
                if !connection.fill() {
                    serverClosed = true
                    print("\r\u{1B}[K", terminator: "")
                    return 0
                }
                drainBuffered()
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
