/// A session's background work in task slots: starting work in a slot cancels the
/// work already there, and `wait` waits for all of it.
extension Session {
    /// Runs `body` on this session in the background, cancelling the work already in `slot`.
    ///
    /// The latest wins, without checks in `body`: once its work is replaced (another
    /// `run` in the slot), cancelled (``cancel(_:)``) or its session ends, what it does
    /// goes nowhere — ``update(_:display:_:)`` changes a scratch copy and displays
    /// nothing, ``showAlert(_:)`` shows nothing, ``ask(_:)`` answers `.dismissed` at
    /// once, and ``call(_:_:)-(Backend.Type,_)`` throws `CancellationError` before the backend is called.
    public func run(_ slot: TaskSlot, _ body: @escaping @Sendable (isolated Session) async -> Void) {
        tasks[slot]?.task.cancel()
        taskGeneration += 1
        let generation = taskGeneration
        runningWork += 1
        let task = Task { await self.execute(slot, generation, body) }
        tasks[slot] = (generation, task)
    }

    private func execute(_ slot: TaskSlot, _ generation: Int, _ body: @Sendable (isolated Session) async -> Void) async {
        // In a cluster, every store write the work makes is fenced by this session's lease.
        await Self.$inBackgroundWork.withValue(true) {
            await SessionFence.$current.withValue(fence) { await body(self) }
        }
        runningWork -= 1
        if tasks[slot]?.generation == generation { tasks[slot] = nil }
        checkSettled()
    }

    /// Cancels the work in `slot`, if any.
    public func cancel(_ slot: TaskSlot) {
        tasks[slot]?.task.cancel()
    }

    /// Whether work runs in `slot` (until it ends, even once cancelled).
    public func isRunning(_ slot: TaskSlot) -> Bool {
        tasks[slot] != nil
    }

    /// Set while a ``run(_:_:)`` body runs (and the tasks it starts).
    @TaskLocal static var inBackgroundWork = false

    /// Background work that was replaced or cancelled: what it shows goes nowhere.
    var isStaleWork: Bool { Self.inBackgroundWork && Task.isCancelled }

    /// Calls a backend with its service: `operation` gets the value ``Services`` holds
    /// for `backend`.
    ///
    /// ```swift
    /// let results = try await session.call(PlacesKey.self) { places in try await places.search(query) }
    /// ```
    ///
    /// Before `operation` runs: work that was replaced or cancelled gets
    /// `CancellationError` (the latest wins), a failure `fault` armed for the backend's
    /// name is thrown, and a backend the server's ``Services`` lack throws
    /// ``MissingBackend`` (the client gets `internal_error`). While `operation` runs,
    /// a ``BlockingPool`` it uses keys its jobs by this session's client address
    /// (``BlockingPool/callerKey``): one address cannot starve the others' calls.
    public func call<Backend: BackendKey, T: Sendable>(
        _ backend: Backend.Type, _ operation: (Backend.Value) async throws -> T
    ) async throws -> T {
        try Task.checkCancellation()
        guard let service = services.value(for: backend) else { throw MissingBackend(name: Backend.name) }
        guard timeline != nil else {
            try application.faults.check(Backend.name)
            return try await BlockingPool.$callerKey.withValue(peer ?? "local") { try await operation(service) }
        }
        // The inspector is on: the call goes into the session's timeline.
        let started = ContinuousClock.now
        do {
            try application.faults.check(Backend.name)
            let value = try await BlockingPool.$callerKey.withValue(peer ?? "local") { try await operation(service) }
            note(.call(backend: Backend.name, failed: nil), duration: .now - started)
            return value
        } catch {
            note(.call(backend: Backend.name, failed: SessionTimeline.failure(error)), duration: .now - started)
            throw error
        }
    }

    /// Calls a backend known only by name, failing first if `fault` armed a failure for it.
    @available(*, deprecated, message: "declare a BackendKey and call it: session.call(TodoStoreKey.self) { store in … }")
    public func call<T: Sendable>(_ backend: String, _ operation: () async throws -> T) async throws -> T {
        try Task.checkCancellation()
        try application.faults.check(backend)
        return try await BlockingPool.$callerKey.withValue(peer ?? "local") { try await operation() }
    }

    // MARK: - wait

    func waitUntilSettled(timeout: Duration) async -> Bool {
        if runningWork == 0 { return true }
        let id = nextWaiterID
        nextWaiterID += 1
        let sleep = services.sleep
        let timer = Task {
            try? await sleep(timeout)
            guard !Task.isCancelled else { return }
            self.expireWaiter(id)
        }
        let settled = await withCheckedContinuation { settleWaiters[id] = $0 }
        timer.cancel()
        return settled
    }

    private func expireWaiter(_ id: Int) {
        settleWaiters.removeValue(forKey: id)?.resume(returning: false)
    }

    func checkSettled() {
        guard runningWork == 0, !settleWaiters.isEmpty else { return }
        let waiters = settleWaiters
        settleWaiters = [:]
        for (_, waiter) in waiters { waiter.resume(returning: true) }
    }
}
