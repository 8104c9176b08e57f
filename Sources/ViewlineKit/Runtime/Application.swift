import NIOCore
import Synchronization
import Prometheus
import Foundation
import Logging

/// A server's view-models assembled once: the command table (built-in commands
/// and every view-model's), the views in order, the backends `fault` can target,
/// and the `help` reply. Every session of the server shares it.
public final class Application: Sendable {
    /// Every command the server understands, in `help` order.
    public let commands: CommandTable
    /// The views, in the order `state` lists them.
    public let views: [ViewDescription]
    /// What every display and `state` reply reads of each view, by the same index.
    let viewCodings: [ViewCoding]
    /// Every view-model's backends, for `fault` and `help`.
    public let backends: [Backend]
    /// The declared backends ``services`` lacks, in declaration order: a server
    /// refuses to start with any (``ViewlineServer``), `TestStore` records each as a
    /// test issue, and a call to one fails with ``MissingBackend``.
    public let missingBackends: [Backend]
    /// Where a view-model's declarations disagree with its `State`: a field the state
    /// encodes that ``ViewModel/stateSummary`` does not name, a ``ViewModel/busyFields``
    /// entry that is no boolean the state encodes (read from each initial state). A
    /// server logs them at start; `TestStore` records each as an issue.
    public let declarationIssues: [String]
    /// Every error code a reply can carry, in `help` order.
    public let errors: [ErrorCode]
    /// What every session's view-models reach.
    public let services: Services
    /// Whether admin commands (`fault`) are enabled.
    public let admin: Bool
    /// Names the server in `welcome`.
    public let serverName: String
    /// The longest line a client may send, said in `welcome` (a client refuses a
    /// longer one itself: the server's `line_too_long` for it cannot name its id).
    let maximumLineBytes: Int
    /// The armed `fault`s, shared with any service that checks them itself.
    public let faults: FaultInjector
    /// Every live session by token: attach, expiry, the session limit.
    package let sessions: SessionRegistry
    /// What every session's event log may hold together.
    let eventLogBudget: EventLogBudget
    /// `attach`'s throttles (see Application+Attach.swift).
    let attachPolicy: AttachPolicy

    /// Every command's handler, in the order of `commands.all`. A session runs its
    /// event loop's copies of them (``handlers(on:)``).
    let handlers: [AnyCommand]
    /// Each event loop's copies of ``handlers``, by the loop's identity.
    private let loopHandlers = Mutex<[ObjectIdentifier: [AnyCommand]]>([:])
    let viewIndex: [ObjectIdentifier: Int]
    let userChangedHooks: [@Sendable (isolated Session, String?) async -> Void]
    let restoredHooks: [@Sendable (isolated Session) async -> Void]
    /// The cluster this node belongs to, if any: session records, `moved`, restore.
    public let cluster: Cluster?
    /// Makes the sessions' tokens, under the cluster's key (any node recognises
    /// them) or this node's own.
    let tokens: SessionTokens
    /// Operators' figures (`/metrics`), when the server was asked for them
    /// (``ServerConfiguration/metricsPort``); `nil` costs nothing.
    public let metrics: ServerMetrics?
    /// The last slow commands (`slowlog`).
    public let slowLog: SlowLog
    /// The last views' records a restore could not read (`inspect`), newest last.
    let unreadableRecords = Mutex<[UnreadableRecord]>([])
    /// Event loops serving this application (`info`): set by the server that runs it.
    let eventLoopCount = Atomic<Int>(System.coreCount)
    /// The shortest inspector token a server takes: 16 characters. Length alone is
    /// no strength: make it random (`openssl rand -hex 16`, 128 bits); wrong guesses
    /// cost a second each and are throttled per address.
    public static let shortestInspectorToken = 16

    /// When this application started (`info`'s uptime).
    public let startedAt = ContinuousClock.now
    /// Where a command's unexpected error goes, with its session and command (the
    /// client gets `internal_error` with a generic message: an error's text may hold
    /// anything a backend said).
    public let logger: Logger
    /// Whether each command is logged (debug level): checked once, not per command.
    let logsCommands: Bool
    /// Whether sessions keep a timeline for the inspector (`inspect`): on a server with
    /// admin commands or an inspector token.
    let inspects: Bool
    /// What plays a recorded session back, in a replay (``ServerConfiguration/replayer``).
    let replayer: (any SessionReplayer)?
    /// SHA-256 of the inspector token (``ServerConfiguration/inspectorToken``), the
    /// only form it is kept in; `nil` without one.
    let inspectorTokenDigest: [UInt8]?
    /// Connections open now by transport, kept by the server (`info`, `/metrics`).
    public let connections: ConnectionCounts
    let helpResult: JSON

    /// The view-models, in order, what they reach, and the server's settings.
    ///
    /// - Parameters:
    ///   - models: the view-models, in the order `state` and `help` list them.
    ///   - services: what the view-models reach (backends, database, clock).
    ///   - faults: the `fault` table, when a service checks it itself.
    ///   - cluster: this node's part in a cluster, if any.
    ///   - configuration: the server's settings; the application reads
    ///     ``ServerConfiguration/admin``, ``ServerConfiguration/serverName``,
    ///     ``ServerConfiguration/sessions``, ``ServerConfiguration/slowCommandThreshold``,
    ///     and records figures when ``ServerConfiguration/metricsPort`` is set (into
    ///     ``ServerConfiguration/metricsRegistry``).
    ///   - logger: where a command's unexpected error is logged.
    ///
    /// - Precondition: view names and command names are unique, built-in ones included.
    public init(
        _ models: [any ViewModel.Type], services: Services = Services(), faults: FaultInjector = FaultInjector(),
        cluster: Cluster? = nil, configuration: ServerConfiguration = ServerConfiguration(),
        logger: Logger = Logger(label: "viewline")
    ) {
        let admin = configuration.admin, serverName = configuration.serverName, limits = configuration.sessions
        let recordsMetrics = configuration.metricsPort != nil, metricsRegistry = configuration.metricsRegistry
        let slowCommandThreshold = configuration.slowCommandThreshold
        self.logger = logger
        attachPolicy = AttachPolicy(attachesPerSecond: limits.attachesPerSecondPerAddress)
        connections = ConnectionCounts(
            addressBudget: configuration.maximumOutputBytesPerAddress, totalBudget: configuration.maximumOutputBytesTotal)
        logsCommands = logger.logLevel <= .debug
        replayer = configuration.replayer
        inspects = configuration.admin || (configuration.inspectorToken?.utf8.count ?? 0) >= Self.shortestInspectorToken
        // A shorter token opens nothing (``ViewlineServer`` refuses to start with one).
        if let token = configuration.inspectorToken, token.utf8.count >= Self.shortestInspectorToken {
            inspectorTokenDigest = Cluster.digest(Array(token.utf8))
        } else {
            inspectorTokenDigest = nil
        }
        var views: [ViewDescription] = []
        var modelCommands: [AnyCommand] = []
        var backends: [Backend] = []
        var missing: [Backend] = []
        var errors: [ErrorCode] = ErrorCode.builtIn
        var viewIndex: [ObjectIdentifier: Int] = [:]
        var hooks: [@Sendable (isolated Session, String?) async -> Void] = []
        var restoredHooks: [@Sendable (isolated Session) async -> Void] = []
        for model in models {
            precondition(!views.contains { $0.name == model.view }, "two views are named \"\(model.view)\"")
            precondition(model.view != Session.connectionsView, "the view \"\(model.view)\" is the server's own")
            precondition(model.erasedCommands.filter(\.spec.isPrimary).count <= 1, "the view \"\(model.view)\" has more than one primary command")
            viewIndex[ObjectIdentifier(model)] = views.count
            views.append(ViewDescription(model, logger: logger))
            modelCommands += model.erasedCommands.map { $0.shown(in: model.view) }
            for key in model.backends where !backends.contains(where: { $0.name == key.name }) {
                backends.append(key.description)
                if !key.isProvided(in: services) { missing.append(key.description) }
            }
            errors += model.errors.filter { !errors.contains($0) }
            hooks.append(model.erasedUserChanged)
            restoredHooks.append(model.erasedRestored)
        }
        errors.append(.internalError)
        let builtIns = Session.builtInCommands
        // `help` lists the session commands first, then every view-model's, then the
        // alert answers and the admin commands.
        let ordered =
            builtIns.filter { Session.leadingBuiltIns.contains($0.spec.name) } + modelCommands
            + builtIns.filter { !Session.leadingBuiltIns.contains($0.spec.name) }
        commands = CommandTable(ordered.map(\.spec))
        handlers = ordered
        self.views = views
        viewCodings = views.map(ViewCoding.init)
        self.backends = backends
        missingBackends = missing
        declarationIssues = views.flatMap { $0.declarationIssues(services: services) }
        for issue in declarationIssues { logger.warning("a view-model's declaration disagrees with its state", metadata: ["issue": "\(issue)"]) }
        self.errors = errors
        self.services = services
        self.faults = faults
        sessions = SessionRegistry(limits: limits, cluster: cluster)
        eventLogBudget = EventLogBudget(limit: limits.eventLogBudgetBytes)
        self.admin = admin
        self.serverName = serverName
        maximumLineBytes = configuration.maximumLineBytes
        self.viewIndex = viewIndex
        userChangedHooks = hooks
        self.restoredHooks = restoredHooks
        self.cluster = cluster
        cluster?.runs(
            release: configuration.release ?? serverName,
            records: Dictionary(views.compactMap { view in view.recordVersion.map { (view.name, $0) } }, uniquingKeysWith: max))
        tokens = SessionTokens(key: cluster?.tokenKey)
        metrics =
            recordsMetrics
            ? ServerMetrics(
                commandNames: commands.all.map(\.name), clustered: cluster != nil, registry: metricsRegistry ?? PrometheusCollectorRegistry())
            : nil
        slowLog = SlowLog(threshold: slowCommandThreshold)
        helpResult = [
            "commands": .array(commands.all.map(\.json)),
            "services": .array(backends.map { ["name": .string($0.name), "summary": .string($0.summary)] }),
            "views": .array(
                views.map { view -> JSON in
                    var entry: JSONObject = ["name": .string(view.name), "state": .string(view.summary)]
                    if !view.busyFields.isEmpty { entry["busy"] = .array(view.busyFields.map { .string($0) }) }
                    if let version = view.recordVersion { entry["recorded"] = .int(version) }
                    return .object(entry)
                } + [
                    [
                        "name": .string(Session.connectionsView), "state": "{count}: the session's connections, once more than one", "builtin": true,
                    ]
                ]),
            "errors": .array(errors.map { ["code": .string($0.rawValue), "meaning": .string($0.meaning)] }),
        ]
    }

    func index<Model: ViewModel>(of model: Model.Type) -> Int {
        guard let index = viewIndex[ObjectIdentifier(model)] else {
            preconditionFailure("\(Model.self) is not one of this server's view-models")
        }
        return index
    }
}

/// One view as the runtime knows it: its name, its summary, and how to make and
/// encode its state without knowing its type.
public struct ViewDescription: Sendable {
    /// The view's name on the wire.
    public let name: String
    /// The state's shape in one line, for `help`.
    public let summary: String
    /// The state's busy flags (``ViewModel/busyFields``).
    public let busyFields: [String]
    let makeState: @Sendable (Services) -> any Sendable
    let encodeState: @Sendable (any Sendable) -> EncodedState
    /// A copy of the state at `pointer` (one being changed by ``Session/update(_:as:display:_:)``).
    let copyState: @Sendable (UnsafeRawPointer) -> any Sendable
    /// The version of the view's record this release writes; `nil`: not recorded
    /// (``ViewModel/record``).
    public let recordVersion: Int?
    /// What a restore does with a record of this view it cannot read.
    let whenUnreadable: WhenRecordUnreadable
    /// The state's recorded form, when it is not its wire form.
    let encodeRecord: (@Sendable (any Sendable) throws -> JSON)?
    /// Reads a state back from a record of the given version, migrating it; `nil`
    /// when the view is not recorded.
    let readRecord: (@Sendable (JSON, Int) -> Result<any Sendable, UnreadableRecord.Reason>)?
    /// `{"view":"<name>","state":`: how `state`'s reply for this view begins.
    let stateReplyHead: [UInt8]
    /// `,"view":"<name>","state":`: what follows the `rev` in this view's displays.
    let displayViewPart: [UInt8]

    init<Model: ViewModel>(_ model: Model.Type, logger: Logger = Logger(label: "viewline")) {
        name = model.view
        summary = model.stateSummary
        busyFields = model.busyFields
        var head = Array(#"{"view":"#.utf8)
        JSON.string(model.view).write(into: &head)
        head.append(contentsOf: #","state":"#.utf8)
        stateReplyHead = head
        displayViewPart = DisplayEvent.viewPart(model.view)
        makeState = { model.initialState($0) }
        copyState = { $0.assumingMemoryBound(to: Model.State.self).pointee }
        // A state whose encoding throws (its own `encode(to:)`, or nested past
        // `JSON.maximumEncodingDepth`) is the app's bug, not a reason to stop every
        // session: the view shows an empty state, and the log says why (the first time).
        let failureLogged = Atomic(false)
        let encodeBytes: @Sendable (Model.State) -> [UInt8] = { state in
            do {
                return try JSON.bytes(encoding: state)
            } catch {
                if !failureLogged.exchange(true, ordering: .relaxed) {
                    logger.error(
                        "a state failed to encode: the view shows {} instead (logged once per view)",
                        metadata: ["view": "\(model.view)", "error": "\(error)"])
                }
                return Array("{}".utf8)
            }
        }
        if let equatable = Model.State.self as? any (Encodable & Equatable & Sendable).Type {
            encodeState = Self.cachingEncoder(equatable, encodeBytes)
        } else {
            encodeState = { EncodedState(bytes: encodeBytes($0 as! Model.State)) }
        }
        if let record = Model.record {
            recordVersion = record.version
            whenUnreadable = record.whenUnreadable
            if record.recordsWireForm {
                encodeRecord = nil
            } else {
                let encode = record.encode
                encodeRecord = { state in try encode(state as! Model.State) }
            }
            readRecord = { json, version -> Result<any Sendable, UnreadableRecord.Reason> in
                switch record.read(json, recordedVersion: version) {
                case .success(let state): .success(state)
                case .failure(let reason): .failure(reason)
                }
            }
        } else {
            recordVersion = nil
            whenUnreadable = .startAtInitialState
            encodeRecord = nil
            readRecord = nil
        }
    }
}

extension ViewDescription {
    /// An encoder that reuses the last encoding of an equal state.
    private static func cachingEncoder<Equatable: Encodable & Swift.Equatable & Sendable, State>(
        _ type: Equatable.Type, _ encodeBytes: @escaping @Sendable (State) -> [UInt8]
    ) -> @Sendable (any Sendable) -> EncodedState {
        let cache = EncodedStateCache<Equatable>()
        return { state in cache.encode(state as! Equatable) { encodeBytes($0 as! State) } }
    }
}

extension ViewModel {
    static var erasedCommands: [AnyCommand] {
        commands.map(AnyCommand.init)
    }

    static var erasedUserChanged: @Sendable (isolated Session, String?) async -> Void {
        { session, previous in await userChanged(in: ViewSession(session), from: previous) }
    }

    static var erasedRestored: @Sendable (isolated Session) async -> Void {
        { session in await restored(in: ViewSession(session)) }
    }
}

extension Application {
    /// The position of the view called `name` (in any case) in ``views``.
    func index(ofView name: String) -> Int? {
        if let index = views.firstIndex(where: { $0.name == name }) { return index }
        let lowercased = name.lowercased()
        return views.firstIndex { $0.name == lowercased }
    }

    /// The handler of `request` among `handlers` (``handlers``' order; by default
    /// ``handlers``): at its index when this server's table decoded it (no second
    /// lookup by name), else by name.
    func handler(for request: Request, among handlers: [AnyCommand]? = nil) -> AnyCommand? {
        let handlers = handlers ?? self.handlers
        if let index = request.command, index < handlers.count, handlers[index].spec.name == request.name { return handlers[index] }
        return commands.index(named: request.name).map { handlers[$0] }
    }

    /// The handlers the sessions on `loop` run: copies of ``handlers`` of that loop's
    /// own, made once per loop. Each command retains its handler and reads its
    /// declaration; were every loop's sessions to share one object, its reference
    /// count (beside the declaration, in one cache line) would move between the
    /// loops' cores on every command — as it did, 3 % of a 50 × 16 `ping` run's
    /// samples.
    func handlers(on loop: any EventLoop) -> [AnyCommand] {
        loopHandlers.withLock { copies in
            if let handlers = copies[ObjectIdentifier(loop)] { return handlers }
            let handlers = self.handlers.map { $0.copy() }
            copies[ObjectIdentifier(loop)] = handlers
            return handlers
        }
    }

    /// A new, empty event log within this application's limits and budget.
    func makeEventLog(address: String?) -> EventLog {
        EventLog(
            maximumEvents: sessions.limits.eventLogEvents, maximumBytes: sessions.limits.eventLogBytes, budget: eventLogBudget,
            address: address)
    }
}
