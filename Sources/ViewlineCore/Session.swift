import Foundation
import ViewlinePersistence
import ViewlineProtocol

/// One client's view-models: their state, the async work they run and the alerts
/// they ask, behind one actor. Commands come in through ``handle(_:)``; everything
/// the client should see goes out through `output`, in order.
///
/// Ordering rules kept here: every command's reply precedes the events the command
/// causes (events raised while a command runs are held until its reply is out), and
/// `rev` grows by one for every display, alert or dismiss, in the order they are sent.
public actor Session {
    public nonisolated let id: String
    /// The secret that identifies this session to its owner; never logged.
    public nonisolated let token: String
    let environment: SessionEnvironment
    private let output: @Sendable (ServerMessage) -> Void

    // Event ordering.
    var rev = 0
    private var holdingEvents = false
    private var heldEvents: [ServerMessage] = []
    var closed = false

    // Alerts (see Session+Alerts.swift).
    var nextAlertNumber = 1
    var presentedAlert: PendingAlert?
    var queuedAlerts: [PendingAlert] = []

    // Background work (see Session+Tasks.swift).
    var tasks: [TaskKey: (generation: Int, task: Task<Void, Never>)] = [:]
    var taskGeneration = 0
    var runningWork = 0
    var settleWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
    var nextWaiterID = 0
    var contactsObservation: Task<Void, Never>?

    // Views.
    var searchView = SearchViewState()
    var sessionView = SessionViewState()
    var draftView = DraftViewState()
    var contactsView = ContactsViewState()
    var contactsOpen = false
    var playlist = PlaylistFlow()
    var accessToken: AccessToken?

    public enum Outcome: Sendable, Equatable {
        case keepOpen
        /// The client asked to leave: the caller sends `bye` and closes.
        case close
    }

    public init(id: String, environment: SessionEnvironment, output: @escaping @Sendable (ServerMessage) -> Void) {
        self.id = id
        self.token = Session.makeSecret()
        self.environment = environment
        self.output = output
    }

    public nonisolated var welcome: ServerMessage {
        .welcome(session: id, token: token, server: environment.serverName)
    }

    /// Runs one command and sends its reply, then any events it caused.
    public func handle(_ request: Request) async -> Outcome {
        if case .wait(let timeout) = request.command {
            // `wait` lets events flow while it waits: holding them would defeat its purpose.
            let settled = await waitUntilSettled(timeout: .milliseconds(timeout ?? 10_000))
            send(.reply(re: request.id, result: settled
                ? .success(["settled": true])
                : .failure(ProtocolError(.timeout, "background work still running after \(timeout ?? 10_000) ms"))))
            return .keepOpen
        }
        holdingEvents = true
        let result: Result<JSON, ProtocolError>
        do {
            result = .success(try await perform(request.command))
        } catch let error as ProtocolError {
            result = .failure(error)
        } catch {
            result = .failure(ProtocolError(.internalError, "\(request.command.name) failed: \(error)"))
        }
        send(.reply(re: request.id, result: result))
        holdingEvents = false
        let held = heldEvents
        heldEvents = []
        for event in held { send(event) }
        return request.command == .quit ? .close : .keepOpen
    }

    /// Replies a failure for a line that never became a command (bad JSON, too long...).
    public func reject(re: JSON, _ error: ProtocolError) {
        send(.reply(re: re, result: .failure(error)))
    }

    /// Waits (up to `timeout`) until no background work runs: used when the client
    /// stops sending but still reads, as `printf … | nc -N` does.
    public func finishWork(timeout: Duration) async {
        _ = await waitUntilSettled(timeout: timeout)
    }

    /// Stops all work; nothing more is sent. Pending drafts stay in the database.
    public func close() {
        guard !closed else { return }
        closed = true
        for (_, entry) in tasks { entry.task.cancel() }
        tasks = [:]
        contactsObservation?.cancel()
        contactsObservation = nil
        let alerts = (presentedAlert.map { [$0] } ?? []) + queuedAlerts
        presentedAlert = nil
        queuedAlerts = []
        for alert in alerts { resolve(alert, .dismissed) }
        for (_, waiter) in settleWaiters { waiter.resume(returning: false) }
        settleWaiters = [:]
    }

    // MARK: - Output

    private func send(_ message: ServerMessage) {
        guard !closed else { return }
        output(message)
    }

    /// Sends (or holds, while a command runs) an event, giving it the next `rev`.
    func emit(_ make: (Int) -> ServerMessage) {
        guard !closed else { return }
        rev += 1
        let event = make(rev)
        if holdingEvents { heldEvents.append(event) } else { output(event) }
    }

    /// Displays a view's whole current state.
    func display(_ view: ViewName) {
        let state = viewState(view)
        emit { .display(rev: $0, view: view.rawValue, state: state) }
    }

    func viewState(_ view: ViewName) -> JSON {
        switch view {
        case .search: searchView.json
        case .session: sessionView.json
        case .draft: draftView.json
        case .contacts: contactsView.json
        case .playlist: playlist.view.json
        }
    }

    // MARK: - Commands

    func perform(_ command: Command) async throws -> JSON {
        switch command {
        case .help(nil):
            return Session.helpResult
        case .help(let name?):
            guard let spec = CommandCatalog.spec(named: name) else {
                throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; help lists every command")
            }
            return ["command": spec.json]
        case .ping:
            return ["pong": true]
        case .quit:
            return ["bye": true]
        case .wait:
            preconditionFailure("wait is handled before perform")
        case .state(let name):
            guard let name else {
                return ["views": .object(JSONObject(ViewName.allCases.map { ($0.rawValue, viewState($0)) }))]
            }
            guard let view = ViewName(rawValue: name.lowercased()) else {
                throw ProtocolError(.unknownView, "no view named \"\(name)\"; views: \(ViewName.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            return ["view": .string(view.rawValue), "state": viewState(view)]
        case .search(let query):
            startSearch(query)
            return ["accepted": true, "query": .string(query)]
        case .confirm(let alert, let fields):
            return try answerAlert(id: alert, confirm: true, fields: fields)
        case .cancel(let alert):
            return try answerAlert(id: alert, confirm: false, fields: [:])
        case .fault(let serviceName, let count, let message):
            guard environment.admin else {
                throw ProtocolError(.adminDisabled, "fault is an admin command; start the server with --admin")
            }
            guard let service = BackendService(rawValue: serviceName.lowercased()) else {
                throw ProtocolError(.unknownService, "no service named \"\(serviceName)\"; services: \(BackendService.allCases.map(\.rawValue).joined(separator: ", "))")
            }
            environment.faults.arm(service, count: count, message: message)
            return ["service": .string(service.rawValue), "count": .int(count)]
        case .login(let user, let password):
            return try await loginCommand(user: user, password: password)
        case .logout:
            return logout()
        case .draft(let text):
            return try await setDraft(text)
        case .save:
            return try await startSave()
        case .saved:
            return try await listSaved()
        case .contacts:
            try await openContacts()
            return ["accepted": true]
        case .sync:
            startSync()
            return ["accepted": true]
        case .playlist:
            return try startPlaylist()
        case .more:
            return try morePlaylist()
        }
    }

    static let helpResult: JSON = [
        "commands": .array(CommandCatalog.all.map(\.json)),
        "services": .array(CommandCatalog.services.map { ["name": .string($0.name), "summary": .string($0.summary)] }),
        "views": .array(CommandCatalog.views.map { ["name": .string($0.name), "state": .string($0.summary)] }),
        "errors": .array(ErrorCode.allCases.map { ["code": .string($0.rawValue), "meaning": .string($0.meaning)] }),
    ]

    /// A fresh unguessable secret: 192 random bits from the system generator, hex.
    static func makeSecret() -> String {
        var generator = SystemRandomNumberGenerator()
        return (0..<3).map { _ in
            let value = generator.next() as UInt64
            let hex = String(value, radix: 16)
            return String(repeating: "0", count: 16 - hex.count) + hex
        }.joined()
    }
}
