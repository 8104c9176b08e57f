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
    func run(_ slot: TaskSlot, _ body: @escaping @Sendable (isolated Session) async -> Void) {
        // An ended session starts nothing: its work was cancelled as it closed, and work
        // that went on to start more (a retry loop, a handle kept past the end) would
        // otherwise run uncancelled, holding the session, for good.
        guard !closed else { return }
        tasks[slot]?.task.cancel()
        taskGeneration += 1
        let generation = taskGeneration
        runningWork += 1
        // The view-model's background work: held in its slot, cancelled when replaced
        // or when the session closes (a view-model's work outlives the command).
        let task = Task { await self.execute(slot, generation, body) }
        tasks[slot] = (generation, task)
    }

    private func execute(_ slot: TaskSlot, _ generation: Int, _ body: @Sendable (isolated Session) async -> Void) async {
        // In a cluster, every store write the work makes is fenced by this session's lease.
        await Self.$inBackgroundWork.withValue(true) {
            await SessionFence.$current.withValue(fence) { await body(self) }
        }
        runningWork -= 1
        if tasks[slot]?.generation == generation { tasks.removeValueReleasingStorage(forKey: slot) }
        checkSettled()
    }

    /// Cancels the work in `slot`, if any.
    func cancel(_ slot: TaskSlot) {
        tasks[slot]?.task.cancel()
    }

    /// Whether work runs in `slot` (until it ends, even once cancelled).
    func isRunning(_ slot: TaskSlot) -> Bool {
        tasks[slot] != nil
    }

    /// Set while a ``run(_:_:)`` body runs (and the tasks it starts).
    @TaskLocal static var inBackgroundWork = false

    /// Background work that was replaced or cancelled: what it shows goes nowhere.
    var isStaleWork: Bool { Self.inBackgroundWork && Task.isCancelled }

    // MARK: - wait

    func waitUntilSettled(timeout: Duration) async -> Bool {
        if runningWork == 0 { return true }
        let id = nextWaiterID
        nextWaiterID += 1
        let sleep = services.sleep
        // Bounded by `timeout`, and cancelled as soon as the work settles.
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
        settleWaiters.removeValueReleasingStorage(forKey: id)?.resume(returning: false)
    }

    func checkSettled() {
        guard runningWork == 0, !settleWaiters.isEmpty else { return }
        let waiters = settleWaiters
        settleWaiters = [:]
        for (_, waiter) in waiters { waiter.resume(returning: true) }
    }
}
