import Logging

/// A session as one view-model sees it: its own state, the work it runs, the alerts
/// it asks, the session's user and the services — nothing of the server, the
/// cluster or the connections.
///
/// A command's `perform`, a ``run(_:_:)`` body, an observation's callback and the
/// ``ViewModel`` hooks get one, isolated to it, so they read and change the state
/// without `await`:
///
/// ```swift
/// Command("increment", summary: "Add one.") { session, _ in
///     session.update { $0.count += 1 }
///     return ["count": .int(session.state.count)]
/// }
/// ```
///
/// Every view-model of a session shares the session's one executor: handles of the
/// same session never race each other, and ``sibling(_:)`` reaches another
/// view-model's state in the same isolation.
public final actor ViewSession<Model: ViewModel> {
    /// The runtime's session, whose executor this handle runs on.
    let session: Session
    /// The model's position in the application's views.
    let index: Int

    init(_ session: Session) {
        self.session = session
        index = session.application.index(of: Model.self)
    }

    /// The session's executor: code isolated to this handle runs where the session's does.
    public nonisolated var unownedExecutor: UnownedSerialExecutor { session.unownedExecutor }

    /// The session's name in `welcome` and logs (`s1`).
    public nonisolated var id: String { session.id }
    /// The backends, database and clock the view-model reaches.
    public nonisolated var services: Services { session.services }
    /// The client's address when it came over the network, as every per-client limit
    /// keys on it (an IPv4 address, or an IPv6 /64); `nil` in tests.
    public nonisolated var peer: String? { session.peer }
    /// The server's logger with the session's id in its metadata (`session=s1`).
    public nonisolated var logger: Logger { session.logger }

    // MARK: - State

    /// The view-model's current state in this session.
    public var state: Model.State {
        withSession { $0.currentState(index) as! Model.State }
    }

    /// Changes the state and, unless `display` is false, shows the client the new
    /// state (a `display` event with the next `rev`).
    ///
    /// From background work that was replaced or cancelled (``run(_:_:)``), the change
    /// is made to a scratch copy and dropped: the latest work wins. Inside `change`,
    /// ``state`` (and a ``display()``) read the state as it is changing; an `update`
    /// of this same view-model from inside `change` is made to a copy and dropped,
    /// with an error in the log: make that change to the closure's argument.
    @discardableResult
    public func update<Result>(display: Bool = true, _ change: (inout Model.State) throws -> Result) rethrows -> Result {
        try withoutActuallyEscaping(change) { change in
            // `change` runs here, synchronously, on this handle's (the session's) executor.
            nonisolated(unsafe) let change = change
            return try withSession { [index] session in try session.update(index, as: Model.State.self, display: display, change) }
        }
    }

    /// Shows the client the view's current state again (not from replaced background work).
    public func display() {
        withSession { [index] session in session.displayUnlessStale(index) }
    }

    /// Whether the view has been displayed in this session, on this node or (for a
    /// session restored from its record) on the one before: a view the user opened,
    /// which ``ViewModel/restored(in:)`` may start following its data again, whatever
    /// its restored state looks like.
    public var hasDisplayed: Bool {
        withSession { [index] session in session.displayedViews.contains(index) }
    }

    /// The same session as another of its view-models sees it (the playlist logging
    /// in through the account), on the same executor: reach it with `await`.
    public func sibling<Other: ViewModel>(_ other: Other.Type) -> ViewSession<Other> {
        ViewSession<Other>(session)
    }

    /// Runs `body` with the same session as another of its view-models sees it, at
    /// once (the playlist reading the account's token):
    ///
    /// ```swift
    /// let token = session.sibling(Account.self) { $0.state.accessToken }
    /// ```
    public func sibling<Other: ViewModel, Result>(
        _ other: Other.Type, _ body: (isolated ViewSession<Other>) throws -> Result
    ) rethrows -> Result {
        try withoutActuallyEscaping(body) { body in
            // `body` runs here, synchronously, on the executor both handles share.
            nonisolated(unsafe) let body = body
            return try ViewSession<Other>(session).entered(body)
        }
    }

    // MARK: - Work

    /// Runs `body` in the background, cancelling the work already in `slot` (slots
    /// are the session's, shared by its view-models).
    ///
    /// The latest wins, without checks in `body`: once its work is replaced (another
    /// `run` in the slot), cancelled (``cancel(_:)``) or its session ends, what it does
    /// goes nowhere — ``update(display:_:)`` changes a scratch copy and displays
    /// nothing, ``showAlert(_:)`` shows nothing, ``ask(_:)`` answers `.dismissed` at
    /// once, and ``call(_:_:)`` throws `CancellationError` before the backend is called.
    public func run(_ slot: TaskSlot, _ body: @escaping @Sendable (isolated ViewSession<Model>) async -> Void) {
        withSession { session in session.run(slot) { _ in await body(self) } }
    }

    /// Cancels the work in `slot`, if any.
    public func cancel(_ slot: TaskSlot) {
        withSession { $0.cancel(slot) }
    }

    /// Whether work runs in `slot` (until it ends, even once cancelled).
    public func isRunning(_ slot: TaskSlot) -> Bool {
        withSession { $0.isRunning(slot) }
    }

    /// Calls a backend with its service: `operation` gets the value ``Services`` holds
    /// for `backend`.
    ///
    /// ```swift
    /// let results = try await session.call(PlacesKey.self) { places in try await places.search(query) }
    /// ```
    ///
    /// Before `operation` runs: the views this work changed are displayed (each
    /// once, with its latest state), work that was replaced or cancelled gets
    /// `CancellationError` (the latest wins), a failure `fault` armed for the backend's
    /// name is thrown, and a backend the server's ``Services`` lack throws
    /// ``MissingBackend`` (the client gets `internal_error`). While `operation` runs,
    /// a ``BlockingPool`` it uses keys its jobs by this session's client address
    /// (``BlockingPool/callerKey``): one address cannot starve the others' calls.
    public func call<Backend: BackendKey, T: Sendable>(
        _ backend: Backend.Type, _ operation: (Backend.Value) async throws -> T
    ) async throws -> T {
        try await call(backend, recording: { nil }, operation)
    }

    /// ``call(_:_:)``, naming what the call is asked (`arguments`): a session's
    /// recording keeps them beside the answer, and a replay that makes the call with
    /// other arguments stops there and shows the difference.
    ///
    /// ```swift
    /// let results = try await session.call(PlacesKey.self, with: query) { places in try await places.search(query) }
    /// ```
    ///
    /// A result that is `Codable` is recorded and can be replayed; another is named
    /// in the recording, and a replay that reaches the call says it cannot serve it.
    public func call<Backend: BackendKey, Arguments: Encodable, T: Sendable>(
        _ backend: Backend.Type, with arguments: Arguments, _ operation: (Backend.Value) async throws -> T
    ) async throws -> T {
        try await call(backend, recording: { SessionRecording.encoded(arguments) }, operation)
    }

    private func call<Backend: BackendKey, T: Sendable>(
        _ backend: Backend.Type, recording arguments: () -> JSON?, _ operation: (Backend.Value) async throws -> T
    ) async throws -> T {
        try Task.checkCancellation()
        // A replay answers every call itself: the backend need not be there.
        let replayer = session.application.replayer
        let service = services.value(for: backend)
        if service == nil, replayer == nil { throw MissingBackend(name: Backend.name) }
        // What this work displayed goes out before it waits (a spinner shows even when
        // the backend answers without suspending).
        withSession { $0.flushDisplays() }
        let faults = session.application.faults, caller = peer ?? "local"
        let recording = session.recording
        guard recording != nil || withSession({ $0.timeline != nil }) else {
            guard let service else { throw MissingBackend(name: Backend.name) }
            try faults.check(Backend.name)
            return try await BlockingPool.$callerKey.withValue(caller) { try await operation(service) }
        }
        // The inspector is on (or a replay runs): the call goes into the session's
        // timeline and recording. A replayed call is made when the recorded one was.
        if let replayer { try await replayer.mayCall(backend: Backend.name) }
        // A recording that was cut keeps nothing more: nothing is encoded for it.
        let number = recording.flatMap { $0.isOn ? $0.call(backend: Backend.name, arguments: arguments()) : nil }
        let started = Moment.now
        do {
            let value: T
            if let replayer, let number {
                value = try SessionRecording.replayed(await replayer.answer(call: number, backend: Backend.name), as: T.self, backend: Backend.name)
            } else {
                guard let service else { throw MissingBackend(name: Backend.name) }
                try faults.check(Backend.name)
                value = try await BlockingPool.$callerKey.withValue(caller) { try await operation(service) }
            }
            if let recording, let number, recording.isOn { recording.record(.answer(number, SessionRecording.answer(value))) }
            withSession { $0.note(.call(backend: Backend.name, failed: nil), duration: .now - started) }
            return value
        } catch {
            if let error = error as? UnreplayableCall, let number { session.application.replayer?.couldNotReplay(call: number, error) }
            if let recording, let number, recording.isOn { recording.record(.answer(number, SessionRecording.answer(failure: error))) }
            let failure = SessionTimeline.failure(error)
            withSession { $0.note(.call(backend: Backend.name, failed: failure), duration: .now - started) }
            throw error
        }
    }

    // MARK: - Alerts

    /// Shows an alert and waits for the user's answer: the one-liner flows use.
    ///
    /// ```swift
    /// switch await session.ask(AlertContent(title: "Delete?", message: "…", actions: [.confirm("Delete"), .cancel("Keep")])) {
    /// case .confirmed: …
    /// case .cancelled, .dismissed: …
    /// }
    /// ```
    ///
    /// Alerts are modal and the session's: if one is up, this one queues behind it.
    /// If the calling task is cancelled, the alert is taken down (`dismiss`) and
    /// `.dismissed` is returned.
    public func ask(_ content: AlertContent) async -> AlertAnswer {
        await session.ask(content)
    }

    /// Shows an alert nobody waits on (an error with an OK button); nothing from
    /// background work that was replaced or cancelled.
    public func showAlert(_ content: AlertContent) {
        withSession { $0.showAlert(content) }
    }

    /// Takes an alert down unanswered: `dismiss` if it was presented, silently if queued.
    public func dismissAlert(id: String) {
        withSession { $0.dismissAlert(id: id) }
    }

    /// The id of the presented alert, if one is up.
    public var presentedAlertID: String? { withSession { $0.presentedAlertID } }
    /// What the presented alert shows, if one is up.
    public var presentedAlertContent: AlertContent? { withSession { $0.presentedAlertContent } }

    // MARK: - Observation

    /// Calls `onChange` with the observation's latest value now (if it has one) and
    /// after every change, until the session closes or ``stopObserving(_:)``: the
    /// view shows only what the source of truth holds, whoever changed it. Observing
    /// the same observation again does nothing.
    public func observe<Value>(
        _ observation: SharedObservation<Value>, _ onChange: @escaping @Sendable (isolated ViewSession<Model>, Value) -> Void
    ) {
        withSession { session in
            session.observe(observation) { _, value in self.entered { onChange($0, value) } }
        }
    }

    /// Stops following an observation.
    public func stopObserving<Value>(_ observation: SharedObservation<Value>) {
        withSession { $0.stopObserving(observation) }
    }

    // MARK: - User

    /// Who is logged in, as the view-models see it; `nil` when nobody is.
    public var user: String? { withSession { $0.user } }

    /// Makes `user` the session's user and lets every view-model react
    /// (``ViewModel/userChanged(in:from:)``), in the server's order.
    public func signIn(_ user: String) async {
        await session.signIn(user)
    }

    /// Forgets the session's user and lets every view-model react.
    public func signOut() async {
        await session.signOut()
    }

    // MARK: - One executor

    /// Runs `body` isolated to the session from code isolated to this handle: the two
    /// share one executor, so this is a plain call (what `assumeIsolated` does, without
    /// its check on every call). Only this handle's isolated members call it, and the
    /// compiler lets other code reach those only by hopping onto the executor.
    private func withSession<R>(_ body: (isolated Session) throws -> R) rethrows -> R {
        typealias Plain = (Session) throws -> R
        return try withoutActuallyEscaping(body) { body in try unsafeBitCast(body, to: Plain.self)(session) }
    }

    /// Runs `body` isolated to this handle from code isolated to its session.
    nonisolated func entered<R>(_ body: (isolated ViewSession) throws -> R) rethrows -> R {
        assert(session.eventLoop.inEventLoop, "a view-model's handle entered off its session's executor")
        typealias Plain = (ViewSession) throws -> R
        return try withoutActuallyEscaping(body) { body in try unsafeBitCast(body, to: Plain.self)(self) }
    }
}
