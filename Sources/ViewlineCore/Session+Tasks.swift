import ViewlineProtocol

/// Slots for a session's background work: starting work in a slot cancels the
/// work already there ("latest wins" in one line).
enum TaskKey: Hashable {
    case search, save, sync, playlist
}

extension Session {
    /// Runs `body` on this session in the background, cancelling the previous task in `key`.
    func run(_ key: TaskKey, _ body: @escaping @Sendable (isolated Session) async -> Void) {
        tasks[key]?.task.cancel()
        taskGeneration += 1
        let generation = taskGeneration
        runningWork += 1
        let task = Task { await self.execute(key, generation, body) }
        tasks[key] = (generation, task)
    }

    private func execute(_ key: TaskKey, _ generation: Int, _ body: @Sendable (isolated Session) async -> Void) async {
        await body(self)
        runningWork -= 1
        if tasks[key]?.generation == generation { tasks[key] = nil }
        checkSettled()
    }

    func cancelTask(_ key: TaskKey) {
        tasks[key]?.task.cancel()
    }

    /// Calls a backend service, failing first if `fault` armed a failure for it.
    func call<T: Sendable>(_ service: BackendService, _ operation: () async throws -> T) async throws -> T {
        try environment.faults.check(service)
        return try await operation()
    }

    // MARK: - wait

    func waitUntilSettled(timeout: Duration) async -> Bool {
        if runningWork == 0 { return true }
        let id = nextWaiterID
        nextWaiterID += 1
        let sleep = environment.sleep
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
