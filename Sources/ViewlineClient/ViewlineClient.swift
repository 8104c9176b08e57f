@_exported import ViewlineProtocol
import Foundation
import NIOSSL

/// A Viewline session from Swift: commands, their replies, and the session's events,
/// over the line protocol (PROTOCOL.md).
///
/// ```swift
/// let client = try await ViewlineClient.connect(to: .tcp(host: "127.0.0.1", port: 7878))
/// try await client.send("search thai food")
/// // Called after the reply, and still sees the displays that came before the call.
/// try await client.waitForDisplay("search") { $0["loading"] == false }
/// let search = try await client.state("search", as: SearchState.self)
/// ```
///
/// Nothing a program waits for is missed: the client keeps the events it received
/// that nothing has taken yet (up to ``Options/eventBuffer``), and
/// ``waitForDisplay(_:timeout:where:)``, ``waitForAlert(timeout:)`` and a new
/// ``events()`` read those first, then what arrives. An event that lands between a
/// command's reply and the next wait is found by that wait.
///
/// A command line longer than the server takes (its welcome's `maxLineBytes`) is
/// refused with ``ViewlineError`` `line_too_long` before it is sent.
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
        /// Events kept for waits and readers (the oldest go first when full): those
        /// received that no wait or new ``ViewlineClient/events()`` reader has taken
        /// yet, and, for each ``ViewlineClient/events()`` reader, those it has not read.
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
    public internal(set) var welcome: JSON = .null
    /// The session's name (`s1`).
    public internal(set) var session = ""
    /// The session's token: what ``attach(token:lastRev:timeout:)`` and a resume use.
    public internal(set) var token = ""
    /// The highest `rev` seen: where a resumed session picks up.
    public internal(set) var rev = 0
    /// The last `bye` the server said (cleared once resumed).
    public internal(set) var bye: Bye?
    /// How many times the session was resumed.
    public internal(set) var resumed = 0
    /// Where the connection stands.
    public internal(set) var connection: ConnectionState = .reconnecting
    /// The latest state of every view shown so far.
    public internal(set) var views: [String: JSON] = [:]
    /// The alert presented now, if any: set by each `alert`, cleared by its `dismiss`
    /// and as soon as the reply to its `confirm` or `cancel` (from this client) says it
    /// was answered, and by an `attach` answered with a snapshot (which presents the
    /// session's alert again).
    public internal(set) var presentedAlert: Alert?

    var endpoint: Endpoint
    /// The longest line the connection's server takes (its welcome's `maxLineBytes`).
    var lineLimit: Int?
    /// The node first connected to and ``Options/nodes``: where a resume looks.
    let knownNodes: [Endpoint]
    let options: Options
    var line: LineConnection?
    var pending: [Int: Pending] = [:]
    var nextID = 0
    var subscribers: [Int: AsyncStream<ViewlineEvent>.Continuation] = [:]
    var messageSubscribers: [Int: AsyncStream<JSON>.Continuation] = [:]
    var nextSubscriber = 0
    var welcomeWaiter: CheckedContinuation<JSON, any Error>?
    /// Events received that no wait or new `events()` reader has taken yet.
    var received: ReceivedEvents
    /// The waits for an event not received yet, oldest first.
    var waiters: [Waiter] = []
    var nextWaiter = 0
    var ended = false
    /// A resume is under way (``resume()``): a connection of it that closes is its
    /// attempt failing, not a new drop to resume from.
    var resuming = false
    /// When the server was last heard from.
    var heard = ContinuousClock.now
    var pinger: Task<Void, Never>?

    /// A wait for the first event it takes (``waitForDisplay(_:timeout:where:)``,
    /// ``waitForAlert(timeout:)``), until its timer ends it.
    struct Waiter {
        let id: Int
        /// Resumes the wait with `event` and returns true when it is the one waited for.
        let offer: (ViewlineEvent) -> Bool
        /// Ends the wait with an error (its timeout, cancellation, the client closed).
        let fail: (any Error) -> Void
        let timer: Task<Void, Never>
    }

    struct Pending {
        var line: [UInt8]
        var continuation: CheckedContinuation<JSON, any Error>
        /// The client's own (`attach` while resuming): never sent again.
        var isOwn: Bool
        var timer: Task<Void, Never>
    }

    init(endpoint: Endpoint, options: Options) {
        self.endpoint = endpoint
        self.knownNodes = [endpoint] + options.nodes.filter { $0 != endpoint }
        self.options = options
        self.received = ReceivedEvents(limit: options.eventBuffer)
    }

    /// Connects to a server and starts a new session there (its `welcome`).
    public static func connect(to endpoint: Endpoint, options: Options = Options()) async throws -> ViewlineClient {
        let client = ViewlineClient(endpoint: endpoint, options: options)
        let welcome = try await client.open(endpoint)
        await client.started(welcome)
        return client
    }

    func started(_ welcome: JSON) {
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
    func keepAlive(after interval: Duration) async -> Bool {
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
    func open(_ target: Endpoint) async throws -> JSON {
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
        let welcome = try await withCheckedThrowingContinuation { welcomeWaiter = $0 }
        lineLimit = Self.lineLimit(welcome)  // each node says its own
        return welcome
    }

    /// The longest line the server that sent `welcome` takes (`maxLineBytes`, 1.3): a
    /// positive whole number, else `nil` (not said, or not a limit).
    static func lineLimit(_ welcome: JSON) -> Int? {
        switch welcome["maxLineBytes"] {
        case .int(let limit)? where limit > 0: return limit
        case .double(let limit)? where limit > 0 && limit < 9e15 && limit.rounded() == limit: return Int(limit)
        default: return nil
        }
    }

    func failWelcome(_ error: any Error) {
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

    /// Answers `alert` (by default the presented one) with its confirm action. With
    /// no alert given and none presented, throws `no_alert` without asking the server
    /// (which would answer whatever alert is up, maybe one this client never saw).
    @discardableResult
    public func confirm(_ alert: Alert? = nil, fields: [String: String] = [:]) async throws -> JSON {
        var arguments: JSONObject = [:]
        guard let id = (alert ?? presentedAlert)?.id else { throw ViewlineError(code: .noAlert, message: "no alert is presented") }
        arguments["alert"] = .string(id)
        if !fields.isEmpty { arguments["fields"] = .object(JSONObject(fields.sorted { $0.key < $1.key }.map { ($0.key, .string($0.value)) })) }
        return try await send("confirm", arguments: arguments)
    }

    /// Answers `alert` (by default the presented one) with its cancel action; `no_alert`
    /// as ``confirm(_:fields:)`` when there is none.
    @discardableResult
    public func cancel(_ alert: Alert? = nil) async throws -> JSON {
        var arguments: JSONObject = [:]
        guard let id = (alert ?? presentedAlert)?.id else { throw ViewlineError(code: .noAlert, message: "no alert is presented") }
        arguments["alert"] = .string(id)
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
    /// does; otherwise the first display of `view` that does among the events received
    /// that nothing has taken yet (those that came after the last command's reply
    /// included), or else the first that arrives within `timeout` (the client's
    /// ``Options/timeout`` by default).
    ///
    /// A wait takes the events up to the display it returns, so successive waits move
    /// forward through the session's events: waiting for `loading == true` and then
    /// for `loading == false` never returns a state from before the first. A wait that
    /// throws takes nothing. Throws ``Timeout``, ``ConnectionClosed`` once the client
    /// is closed, or `CancellationError`.
    ///
    /// ```swift
    /// try await client.send("search thai food")
    /// let results = try await client.waitForDisplay("search") { $0["loading"] == false }
    /// ```
    @discardableResult
    public func waitForDisplay(
        _ view: String, timeout: Duration? = nil, where predicate: @escaping @Sendable (JSON) -> Bool = { _ in true }
    ) async throws -> JSON {
        if let state = views[view], predicate(state) {
            received.takeThroughLast { if case .display(view, _, _) = $0 { true } else { false } }
            return state
        }
        return try await next("display of \(view)", timeout: timeout) { event in
            if case .display(view, let state, _) = event, predicate(state) { state } else { nil }
        }
    }

    /// The alert to answer: at once the presented one (``presentedAlert``), if there is
    /// one, even if it arrived before the call; otherwise the next alert that arrives
    /// within `timeout` (the client's ``Options/timeout`` by default). An alert answered
    /// from this client is no longer presented once the reply says so, so after
    /// `confirm` this waits for the next one.
    ///
    /// Throws ``Timeout``, ``ConnectionClosed`` once the client is closed, or
    /// `CancellationError`.
    ///
    /// ```swift
    /// try await client.send("save")
    /// let alert = try await client.waitForAlert()
    /// try await alert.confirm()
    /// ```
    @discardableResult
    public func waitForAlert(timeout: Duration? = nil) async throws -> Alert {
        if let alert = presentedAlert {
            received.takeThroughLast { if case .alert(let queued) = $0 { queued.id == alert.id } else { false } }
            return alert
        }
        // Every alert received and not presented now was answered or went away.
        return try await next("alert", timeout: timeout, readingReceived: false) { event in
            if case .alert(let alert) = event { alert } else { nil }
        }
    }

    /// The first event `predicate` accepts among those received that nothing has taken,
    /// else the first to arrive within `timeout` (the client's ``Options/timeout`` by
    /// default), as the Python and Node clients' `wait_for`/`waitFor`. Takes the events
    /// before it, like ``waitForDisplay(_:timeout:where:)``; throws as it does.
    ///
    /// ```swift
    /// let dismissed = try await client.waitForEvent { if case .dismiss = $0 { true } else { false } }
    /// ```
    @discardableResult
    public func waitForEvent(timeout: Duration? = nil, where predicate: @escaping @Sendable (ViewlineEvent) -> Bool) async throws
        -> ViewlineEvent
    {
        try await next("event", timeout: timeout) { predicate($0) ? $0 : nil }
    }

    /// The first event `extract` gives a value for: among the events received that
    /// nothing has taken (with `readingReceived`), else the first to arrive within
    /// `timeout`. Takes the received events before it; a wait that ends without one
    /// (its timeout, cancellation, the client closed) takes nothing.
    func next<Value: Sendable>(
        _ what: String, timeout: Duration?, readingReceived: Bool = true, _ extract: @escaping (ViewlineEvent) -> Value?
    ) async throws -> Value {
        if readingReceived, let value = received.takeFirst(extract) { return value }
        if ended { throw ConnectionClosed(message: "the client is closed: no \(what) will come", bye: bye, sessionEnded: bye?.code.isFinal ?? true) }
        try Task.checkCancellation()
        nextWaiter += 1
        let id = nextWaiter
        let limit = timeout ?? options.timeout
        return try await withTaskCancellationHandler {
            try await withCheckedThrowingContinuation { (continuation: CheckedContinuation<Value, any Error>) in
                let timer = Task { [weak self] in
                    try? await Task.sleep(for: limit)
                    if !Task.isCancelled { await self?.endWait(id, throwing: Timeout(what: what)) }
                }
                waiters.append(
                    Waiter(
                        id: id,
                        offer: { event in
                            guard let value = extract(event) else { return false }
                            continuation.resume(returning: value)
                            return true
                        },
                        fail: { continuation.resume(throwing: $0) }, timer: timer))
                // Cancelled before the wait was in place: the handler found nothing to end.
                if Task.isCancelled { endWait(id, throwing: CancellationError()) }
            }
        } onCancel: {
            Task { await self.endWait(id, throwing: CancellationError()) }
        }
    }

    /// Ends wait `id` with `error`, if it still waits.
    func endWait(_ id: Int, throwing error: any Error) {
        guard let index = waiters.firstIndex(where: { $0.id == id }) else { return }
        let waiter = waiters.remove(at: index)
        waiter.timer.cancel()
        waiter.fail(error)
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

    /// The session's events, in order, for one reader (each call makes a new one): first
    /// the events received that no wait or earlier `events()` call has taken yet (this
    /// call takes them), then every event that arrives. So a loop begun after a
    /// command's reply still sees what came before it.
    ///
    /// Readers do not take from the waits (``waitForDisplay(_:timeout:where:)``,
    /// ``waitForAlert(timeout:)``): an event that arrives goes to every reader, and
    /// unless a wait takes it, it is also kept for the waits and the next `events()`
    /// call. A loop begun after another one ended may therefore be handed again what
    /// the first was handed after it began (compare `rev`s); nothing is skipped. A
    /// reader that falls behind by ``Options/eventBuffer`` loses the oldest. Ends when
    /// the client is closed (after what it holds is read).
    ///
    /// ```swift
    /// try await client.send("save")
    /// for await event in await client.events() {  // begun after the reply: nothing missed
    ///     if case .alert(let alert) = event {
    ///         try await alert.confirm()
    ///         break
    ///     }
    /// }
    /// ```
    public func events() -> AsyncStream<ViewlineEvent> {
        subscription(startingWith: received.takeAll()) { subscribers[$0] = $1 }
    }

    /// The session's events from now on, taking nothing: for a follower that starts
    /// from the client's latest state (``ViewlineModel``).
    func eventsFromNow() -> AsyncStream<ViewlineEvent> {
        subscription { subscribers[$0] = $1 }
    }

    /// Every message from the server from now on, as it came (replies included, with
    /// the client's own ids): for tools that show the wire, and for protocol tests.
    /// Bounded like ``events()``.
    public func messages() -> AsyncStream<JSON> {
        subscription { messageSubscribers[$0] = $1 }
    }

    /// A new bounded stream holding `first`, registered by `add` under a fresh id
    /// (finished at once when the client is closed).
    func subscription<Element: Sendable>(
        startingWith first: [Element] = [], _ add: (Int, AsyncStream<Element>.Continuation) -> Void
    ) -> AsyncStream<Element> {
        let (stream, continuation) = AsyncStream<Element>.makeStream(bufferingPolicy: .bufferingNewest(options.eventBuffer))
        for element in first { continuation.yield(element) }
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

    func unsubscribe(_ id: Int) {
        subscribers[id] = nil
        messageSubscribers[id] = nil
    }

    func request(_ fields: JSONObject, timeout: Duration?, isOwn: Bool = false) async throws -> JSON {
        let reply = try await roundTrip(fields, timeout: timeout, isOwn: isOwn)
        if reply["ok"]?.boolValue == true {
            let result = reply["result"] ?? .null
            if fields["cmd"] == "end-others", let fresh = result["token"]?.stringValue { token = fresh }
            return result
        }
        throw ViewlineError(reply["error"] ?? .null)
    }

    /// Sends a request and returns its reply message, whatever it says.
    func roundTrip(_ fields: JSONObject, timeout: Duration?, isOwn: Bool = false) async throws -> JSON {
        if ended { throw ConnectionClosed(message: "the client is closed", bye: bye, sessionEnded: bye?.code.isFinal ?? true) }
        nextID += 1
        let id = nextID
        var object: JSONObject = ["id": .int(id)]
        for (key, value) in fields.pairs { object[key] = value }
        var bytes: [UInt8] = []
        JSON.object(object).write(into: &bytes)
        if let most = lineLimit, bytes.count > most {
            // The server's `line_too_long` for it could not name its id (PROTOCOL §1):
            // refused here, at once, rather than waited for until the timeout.
            throw ViewlineError(code: .lineTooLong, message: "the line is \(bytes.count) bytes; the server takes at most \(most): not sent")
        }
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

    func timedOut(_ id: Int) {
        guard let entry = pending.removeValue(forKey: id) else { return }
        entry.continuation.resume(throwing: Timeout(what: "reply to command \(id)"))
    }
}
