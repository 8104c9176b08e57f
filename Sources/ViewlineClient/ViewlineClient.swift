@_exported import ViewlineProtocol
import Foundation
import NIOSSL

/// A Viewline session from Swift: commands, their replies, and the session's events,
/// over the line protocol (PROTOCOL.md).
///
/// ```swift
/// let client = try await ViewlineClient.connect(to: .tcp(host: "127.0.0.1", port: 7878))
/// let events = await client.events()
/// try await client.send("search thai food")
/// for await event in events {
///     if case .display("search", let state, _) = event, state["loading"] == false { break }
/// }
/// let search = try await client.state("search", as: SearchState.self)
/// ```
///
/// The client resumes its session by itself (``Options/reconnect``): after a dropped
/// connection or a `bye` that leaves the session alive, it reconnects with backoff —
/// the same node, then the first one and ``Options/nodes`` — attaches from the last `rev` seen (missed
/// events arrive again, nothing twice) and follows `moved`. A command the server did
/// not answer before a `bye` never ran and is sent again on the resumed connection;
/// one whose reply was lost with a connection that dropped without a `bye` throws
/// ``ConnectionClosed`` (it may or may not have run).
public actor ViewlineClient {
    /// How to connect and resume.
    public struct Options: Sendable {
        /// TLS, verified (`nil`: plain TCP).
        public var tls: TLS?
        /// The default wait for a command's reply.
        public var timeout: Duration = .seconds(10)
        /// Connect, TLS handshake and the welcome.
        public var connectTimeout: Duration = .seconds(10)
        /// Resume the session after a dropped connection or a `bye` that leaves it alive.
        public var reconnect = true
        /// The cluster's other nodes, tried when this one is gone.
        public var nodes: [Endpoint] = []
        /// Rounds over the nodes before giving up.
        public var reconnectAttempts = 8
        /// The wait before round `n` (0, 1, …): exponential with full jitter, 0.1 s to 5 s.
        public var backoff: @Sendable (Int) -> Duration = { round in
            .milliseconds(Int64.random(in: 0...min(5000, 100 << min(round, 6))))
        }
        /// Events kept for a reader that falls behind (the oldest go first).
        public var eventBuffer = 1024
        /// The longest line taken from the server, in bytes: a longer one closes the
        /// connection (a hostile server cannot make the client buffer more). 1 MiB by
        /// default, the most a server holds for one connection (`--max-output-bytes`).
        public var maximumLineBytes = 1 << 20
        /// After this much silence from the server, a `ping`; no answer within
        /// ``timeout`` counts as a dead connection, which is resumed (`nil`: only TCP keepalive).
        public var pingInterval: Duration? = .seconds(30)

        /// Options with TLS, a timeout for connecting and for each reply, whether to
        /// resume after a drop, and the cluster's other nodes to try.
        public init(
            tls: TLS? = nil, timeout: Duration = .seconds(10), reconnect: Bool = true, nodes: [Endpoint] = []
        ) {
            self.tls = tls
            self.timeout = timeout
            self.reconnect = reconnect
            self.nodes = nodes
        }
    }

    /// TLS settings: the server is verified against `caFile` (PEM) or the system's trusted roots.
    public struct TLS: Sendable {
        /// A PEM file of the certificate authorities to trust; `nil` for the system's.
        public var caFile: String?

        /// TLS verified against `caFile`, or the system's trusted roots.
        public init(caFile: String? = nil) {
            self.caFile = caFile
        }

        var configuration: TLSConfiguration {
            var configuration = TLSConfiguration.makeClientConfiguration()
            if let caFile { configuration.trustRoots = .file(caFile) }
            return configuration
        }
    }

    /// The server's `welcome` on the first connection (its version, the session, the
    /// token), as it came.
    public private(set) var welcome: JSON = .null
    /// The session's name (`s1`).
    public private(set) var session = ""
    /// The session's token: what ``attach(token:lastRev:timeout:)`` and a resume use.
    public private(set) var token = ""
    /// The highest `rev` seen: where a resumed session picks up.
    public private(set) var rev = 0
    /// The last `bye` the server said (cleared once resumed).
    public private(set) var bye: Bye?
    /// How many times the session was resumed.
    public private(set) var resumed = 0
    /// Where the connection stands.
    public private(set) var connection: ConnectionState = .reconnecting
    /// The latest state of every view shown so far.
    public private(set) var views: [String: JSON] = [:]
    /// The alert presented now, if any.
    public private(set) var presentedAlert: Alert?

    private var endpoint: Endpoint
    /// The node first connected to and ``Options/nodes``: where a resume looks.
    private let knownNodes: [Endpoint]
    private let options: Options
    private var line: LineConnection?
    private var pending: [Int: Pending] = [:]
    private var nextID = 0
    private var subscribers: [Int: AsyncStream<ViewlineEvent>.Continuation] = [:]
    private var messageSubscribers: [Int: AsyncStream<JSON>.Continuation] = [:]
    private var nextSubscriber = 0
    private var welcomeWaiter: CheckedContinuation<JSON, any Error>?
    private var ended = false
    /// When the server was last heard from.
    private var heard = ContinuousClock.now
    private var pinger: Task<Void, Never>?

    private struct Pending {
        var line: [UInt8]
        var continuation: CheckedContinuation<JSON, any Error>
        /// The client's own (`attach` while resuming): never sent again.
        var isOwn: Bool
        var timer: Task<Void, Never>
    }

    private init(endpoint: Endpoint, options: Options) {
        self.endpoint = endpoint
        self.knownNodes = [endpoint] + options.nodes.filter { $0 != endpoint }
        self.options = options
    }

    /// Connects to a server and starts a new session there (its `welcome`).
    public static func connect(to endpoint: Endpoint, options: Options = Options()) async throws -> ViewlineClient {
        let client = ViewlineClient(endpoint: endpoint, options: options)
        let welcome = try await client.open(endpoint)
        await client.started(welcome)
        return client
    }

    private func started(_ welcome: JSON) {
        self.welcome = welcome
        session = welcome["session"]?.stringValue ?? ""
        token = welcome["token"]?.stringValue ?? ""
        connection = .connected
        if let interval = options.pingInterval {
            pinger = Task { [weak self] in
                while !Task.isCancelled {
                    try? await Task.sleep(for: interval / 4)
                    guard let self, await self.keepAlive(after: interval) else { return }
                }
            }
        }
    }

    /// Pings a connection quiet for `interval`; cuts it when the ping goes unanswered
    /// (it is resumed). Returns false once the client is closed.
    private func keepAlive(after interval: Duration) async -> Bool {
        guard !ended else { return false }
        guard connection == .connected, ContinuousClock.now - heard >= interval, let current = line else { return true }
        do {
            try await send("ping", arguments: [:])
        } catch is Timeout {
            if current === line { current.close() }  // dead: the close resumes the session
        } catch {}
        return !ended
    }

    /// Opens a connection to `target`, makes it the client's, and returns its welcome.
    private func open(_ target: Endpoint) async throws -> JSON {
        let opened = try await LineConnection.open(
            target, tls: options.tls, timeout: options.connectTimeout, maximumLineBytes: options.maximumLineBytes)
        line?.close()
        line = opened
        endpoint = target
        Task { [weak self] in
            for await text in opened.lines {
                await self?.receive(text, on: opened)
                opened.took()
            }
            await self?.connectionClosed(opened)
        }
        let timeout = options.connectTimeout
        let timer = Task { [weak self] in
            try? await Task.sleep(for: timeout)
            if !Task.isCancelled { await self?.failWelcome(Timeout(what: "welcome from \(target)")) }
        }
        defer { timer.cancel() }
        return try await withCheckedThrowingContinuation { welcomeWaiter = $0 }
    }

    private func failWelcome(_ error: any Error) {
        welcomeWaiter?.resume(throwing: error)
        welcomeWaiter = nil
    }

    // MARK: - Commands

    /// Sends a line as a person types it (`search thai food`): any app's commands, with
    /// no table in the client. Returns the reply's result; throws ``ViewlineError``.
    @discardableResult
    public func send(_ line: String, timeout: Duration? = nil) async throws -> JSON {
        try await request(["line": .string(line)], timeout: timeout)
    }

    /// Sends a line as a person types it and returns the server's reply message whole
    /// (`{"type":"reply","re":…,"ok":…}`, an error included) instead of its result or a
    /// thrown ``ViewlineError``: for tools that show the wire, such as the REPL. Throws
    /// only when no reply comes (``ConnectionClosed``, ``Timeout``). An `attach` it
    /// sends that succeeds makes that session the one a resume attaches to.
    public func exchange(_ line: String, timeout: Duration? = nil) async throws -> JSON {
        // A line in the JSON form (`{"cmd":…,"args":…}`) goes as that form, with the
        // client's own id; any other as typed.
        var fields: JSONObject = ["line": .string(line)]
        if line.first == "{", let object = (try? JSON.parse(line))?.objectValue, object["cmd"] != nil {
            fields = JSONObject(object.pairs.filter { $0.key != "id" }.map { ($0.key, $0.value) })
        }
        let reply = try await roundTrip(fields, timeout: timeout)
        let words = line.split(separator: " ", omittingEmptySubsequences: true)
        if reply["ok"]?.boolValue == true, words.count >= 2, words[0].lowercased() == "attach",
            let joined = reply["result"]?["session"]?.stringValue
        {
            token = String(words[1])
            session = joined
        }
        return reply
    }

    /// Sends a command by name with its arguments (`send("login", arguments: ["user": "alice", …])`).
    @discardableResult
    public func send(_ command: String, arguments: JSONObject, timeout: Duration? = nil) async throws -> JSON {
        try await request(["cmd": .string(command), "args": .object(arguments)], timeout: timeout)
    }

    /// Joins the session `token` names from this connection (a session opened elsewhere);
    /// with `lastRev`, the events after it are replayed, otherwise every view is sent.
    /// Follows `moved` (the session lives on another node of a cluster): connects there
    /// and attaches again.
    @discardableResult
    public func attach(token: String, lastRev: Int? = nil, timeout: Duration? = nil) async throws -> JSON {
        var arguments: JSONObject = ["token": .string(token)]
        if let lastRev { arguments["lastRev"] = .int(lastRev) }
        var hops = 0
        while true {
            do {
                let result = try await send("attach", arguments: arguments, timeout: timeout)
                self.token = token
                session = result["session"]?.stringValue ?? session
                return result
            } catch let error as ViewlineError where error.code == .moved && hops < 3 {
                guard let target = Self.next(after: error, from: endpoint) else { throw error }
                hops += 1
                _ = try await open(target)
            }
        }
    }

    /// Answers `alert` (by default the presented one) with its confirm action.
    @discardableResult
    public func confirm(_ alert: Alert? = nil, fields: [String: String] = [:]) async throws -> JSON {
        var arguments: JSONObject = [:]
        if let id = (alert ?? presentedAlert)?.id { arguments["alert"] = .string(id) }
        if !fields.isEmpty { arguments["fields"] = .object(JSONObject(fields.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })) }
        return try await send("confirm", arguments: arguments)
    }

    /// Answers `alert` (by default the presented one) with its cancel action.
    @discardableResult
    public func cancel(_ alert: Alert? = nil) async throws -> JSON {
        var arguments: JSONObject = [:]
        if let id = (alert ?? presentedAlert)?.id { arguments["alert"] = .string(id) }
        return try await send("cancel", arguments: arguments)
    }

    /// Waits until the session runs no background work (the `wait` command); returns
    /// whether it settled within `timeout`.
    @discardableResult
    public func settle(timeout: Duration = .seconds(10)) async throws -> Bool {
        let milliseconds = timeout.components.seconds * 1000 + timeout.components.attoseconds / 1_000_000_000_000_000
        do {
            try await send("wait", arguments: ["timeout": .int(Int(milliseconds))], timeout: timeout + .seconds(5))
            return true
        } catch let error as ViewlineError where error.code == .timeout {
            return false
        }
    }

    /// The state of `view` once it matches `predicate`: at once if its latest state
    /// does, otherwise at the first display that does.
    @discardableResult
    public func waitForDisplay(
        _ view: String, timeout: Duration? = nil, where predicate: @escaping @Sendable (JSON) -> Bool = { _ in true }
    ) async throws -> JSON {
        if let state = views[view], predicate(state) { return state }
        let stream = events()
        let limit = timeout ?? options.timeout
        return try await withThrowingTaskGroup(of: JSON.self) { group in
            group.addTask {
                for await event in stream {
                    if case .display(view, let state, _) = event, predicate(state) { return state }
                }
                throw ConnectionClosed(message: "the session ended before a matching display of \(view)", bye: nil, sessionEnded: true)
            }
            group.addTask {
                try await Task.sleep(for: limit)
                throw Timeout(what: "display of \(view)")
            }
            defer { group.cancelAll() }
            return try await group.next()!
        }
    }

    /// Ends the session for good (every connection of it is told `bye`).
    public func quit() async throws {
        try await send("quit", arguments: [:])
        close(reason: "the session ended (quit)")
    }

    /// Closes the connection; the session lives on on the server until it expires.
    public func close() {
        close(reason: "closed by the client")
    }

    /// A view's latest state decoded into the app's own type.
    public func state<State: Decodable>(_ view: String, as type: State.Type = State.self) throws -> State {
        guard let state = views[view] else {
            throw ViewlineError(code: .unknownView, message: "no display of \(view) has arrived yet")
        }
        return try JSONDecoder().decode(State.self, from: Data(state.encoded.utf8))
    }

    /// The session's events from now on, in order, for one reader (each call makes a
    /// new one). A reader that falls behind by ``Options/eventBuffer`` loses the
    /// oldest. Ends when the session ends for this client.
    public func events() -> AsyncStream<ViewlineEvent> {
        subscription { subscribers[$0] = $1 }
    }

    /// Every message from the server from now on, as it came (replies included, with
    /// the client's own ids): for tools that show the wire, and for protocol tests.
    /// Bounded like ``events()``.
    public func messages() -> AsyncStream<JSON> {
        subscription { messageSubscribers[$0] = $1 }
    }

    /// A new bounded stream, registered by `add` under a fresh id (finished at once
    /// when the client is closed).
    private func subscription<Element>(_ add: (Int, AsyncStream<Element>.Continuation) -> Void) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(options.eventBuffer))
        if ended {
            continuation.finish()
            return stream
        }
        let id = nextSubscriber
        nextSubscriber += 1
        add(id, continuation)
        continuation.onTermination = { [weak self] _ in Task { await self?.unsubscribe(id) } }
        return stream
    }

    private func unsubscribe(_ id: Int) {
        subscribers[id] = nil
        messageSubscribers[id] = nil
    }

    private func request(_ fields: JSONObject, timeout: Duration?, isOwn: Bool = false) async throws -> JSON {
        let reply = try await roundTrip(fields, timeout: timeout, isOwn: isOwn)
        if reply["ok"]?.boolValue == true {
            let result = reply["result"] ?? .null
            if fields["cmd"] == "end-others", let fresh = result["token"]?.stringValue { token = fresh }
            return result
        }
        throw ViewlineError(reply["error"] ?? .null)
    }

    /// Sends a request and returns its reply message, whatever it says.
    private func roundTrip(_ fields: JSONObject, timeout: Duration?, isOwn: Bool = false) async throws -> JSON {
        if ended { throw ConnectionClosed(message: "the client is closed", bye: bye, sessionEnded: bye?.code.isFinal ?? true) }
        nextID += 1
        let id = nextID
        var object: JSONObject = ["id": .int(id)]
        for (key, value) in fields.pairs { object[key] = value }
        var bytes: [UInt8] = []
        JSON.object(object).write(into: &bytes)
        bytes.append(0x0A)
        let limit = timeout ?? options.timeout
        let reply = try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<JSON, any Error>) in
            let timer = Task { [weak self] in
                try? await Task.sleep(for: limit)
                if !Task.isCancelled { await self?.timedOut(id) }
            }
            pending[id] = Pending(line: bytes, continuation: continuation, isOwn: isOwn, timer: timer)
            // While resuming there is no connection: the line goes out once resumed.
            if isOwn || connection == .connected { line?.write(bytes) }
        }
        return reply
    }

    private func timedOut(_ id: Int) {
        guard let entry = pending.removeValue(forKey: id) else { return }
        entry.continuation.resume(throwing: Timeout(what: "reply to command \(id)"))
    }

    // MARK: - Receiving

    private func receive(_ text: [UInt8], on connection: LineConnection) {
        guard connection === line, let message = try? JSON.parse(text, limits: .serverMessage) else { return }
        heard = .now
        for continuation in messageSubscribers.values { continuation.yield(message) }
        let type = message["type"]?.stringValue
        if type != "reply", let rev = message["rev"]?.intValue { self.rev = max(self.rev, rev) }
        switch type {
        case "welcome":
            welcomeWaiter?.resume(returning: message)
            welcomeWaiter = nil
        case "reply":
            guard let id = message["re"]?.intValue, let entry = pending.removeValue(forKey: id) else { return }
            entry.timer.cancel()
            entry.continuation.resume(returning: message)
        case "display":
            guard let view = message["view"]?.stringValue, let state = message["state"] else { return }
            views[view] = state
            publish(.display(view: view, state: state, rev: message["rev"]?.intValue ?? 0))
        case "alert":
            let alert = Alert(message, client: self)
            presentedAlert = alert
            publish(.alert(alert))
        case "dismiss":
            guard let id = message["id"]?.stringValue else { return }
            if presentedAlert?.id == id { presentedAlert = nil }
            publish(.dismiss(id: id, rev: message["rev"]?.intValue ?? 0))
        case "bye":
            let said = Bye(Bye.Code(rawValue: message["code"]?.stringValue ?? "shutdown"), message["reason"]?.stringValue ?? "")
            bye = said
            if Bye.isFinal(code: message["code"]?.stringValue, reason: said.reason) { ended = true }
            failWelcome(ConnectionClosed(message: "the server refused the connection: \(said.reason)", bye: said, sessionEnded: false))
            publish(.bye(said))
        default:
            break
        }
    }

    private func publish(_ event: ViewlineEvent) {
        for continuation in subscribers.values { continuation.yield(event) }
    }

    private func setConnection(_ state: ConnectionState) {
        guard connection != state else { return }
        connection = state
        publish(.connection(state))
    }

    /// `connection` closed: resume the session, or end.
    private func connectionClosed(_ connection: LineConnection) async {
        guard connection === line else { return }
        line = nil
        failWelcome(
            ConnectionClosed(
                message: connection.failureDescription ?? "the server closed the connection before its welcome", bye: bye, sessionEnded: false))
        guard options.reconnect, !ended, !session.isEmpty else {
            close(reason: bye.map { "the server said bye: \($0.reason)" } ?? "the connection closed")
            return
        }
        // A server answers every command it began before it says `bye` (PROTOCOL §4):
        // after one, the commands still pending never ran and go again once resumed.
        // Without one, a lost reply leaves a command's fate unknown.
        if bye == nil {
            for (id, entry) in pending where !entry.isOwn {
                pending[id] = nil
                entry.timer.cancel()
                entry.continuation.resume(
                    throwing: ConnectionClosed(
                        message: "the connection dropped before the reply; the command may or may not have run", bye: nil, sessionEnded: false))
            }
        }
        setConnection(.reconnecting)
        await resume()
    }

    /// Reconnects with backoff and attaches from the last rev seen: the same node
    /// first, then the other nodes; `moved` is followed.
    private func resume() async {
        let candidates = [endpoint] + knownNodes.filter { $0 != endpoint }
        for attempt in 0..<(options.reconnectAttempts * candidates.count) {
            if ended { break }
            var target = candidates[attempt % candidates.count]
            hops: for _ in 0..<3 {
                do {
                    _ = try await open(target)
                    _ = try await request(
                        ["cmd": "attach", "args": ["token": .string(token), "lastRev": .int(rev)]], timeout: options.connectTimeout, isOwn: true)
                    resumed += 1
                    bye = nil
                    setConnection(.connected)
                    for id in pending.keys.sorted() where !(pending[id]?.isOwn ?? true) {
                        line?.write(pending[id]!.line)  // never ran: sent again, in the order first sent
                    }
                    return
                } catch let error as ViewlineError where error.code == .moved && Self.next(after: error, from: target) != nil {
                    target = Self.next(after: error, from: target)!
                    continue hops
                } catch let error as ViewlineError where !Self.retryableAttach.contains(error.code) {
                    close(reason: "the session could not be resumed: \(error.message)")
                    return
                } catch {
                    break hops
                }
            }
            if attempt % candidates.count == candidates.count - 1 {
                try? await Task.sleep(for: options.backoff(attempt / candidates.count))
            }
        }
        close(reason: "the session could not be resumed: no node answered")
    }

    /// Where a `moved` sends a client that came to `target`: the owner's line port, or
    /// its page's WebSocket for a client on a WebSocket.
    static func next(after moved: ViewlineError, from target: Endpoint) -> Endpoint? {
        target.webSocketPath == nil ? moved.address : moved.webAddress
    }

    /// What `attach` may answer while a session is still being handed over.
    static let retryableAttach: Set<ErrorCode> = [.moved, .unavailable, .serverBusy, ErrorCode(rawValue: "attach_throttled")]

    private func close(reason: String) {
        ended = true
        pinger?.cancel()
        line?.close()
        line = nil
        let sessionEnded = bye?.code.isFinal ?? false
        for (_, entry) in pending {
            entry.timer.cancel()
            entry.continuation.resume(throwing: ConnectionClosed(message: reason, bye: bye, sessionEnded: sessionEnded))
        }
        pending = [:]
        failWelcome(ConnectionClosed(message: reason, bye: bye, sessionEnded: sessionEnded))
        if case .disconnected = connection {} else { setConnection(.disconnected(reason: reason)) }
        for continuation in subscribers.values { continuation.finish() }
        subscribers = [:]
        for continuation in messageSubscribers.values { continuation.finish() }
        messageSubscribers = [:]
    }
}
