/// Following a shared observation: the view shows only what the source of truth
/// holds, and is told whenever it changes, whoever changed it.
extension Session {
    /// Calls `onChange` on this session with the observation's latest value now (if
    /// it has one) and after every change, until the session closes or
    /// ``stopObserving(_:)``. Observing the same observation again does nothing.
    func observe<Value>(
        _ observation: SharedObservation<Value>,
        _ onChange: @escaping @Sendable (isolated Session, Value) -> Void
    ) {
        let key = ObjectIdentifier(observation)
        guard !closed, observations[key] == nil else { return }
        // Values arrive on this session's event loop, which is its executor.
        let id = observation.watch(on: eventLoop) { [weak self] value in
            self?.assumeIsolated { $0.deliver(value, onChange) }
        }
        observations[key] = { observation.leave(id) }
    }

    /// Stops following an observation.
    func stopObserving<Value>(_ observation: SharedObservation<Value>) {
        observations.removeValueReleasingStorage(forKey: ObjectIdentifier(observation))?()
    }

    /// Runs `onChange`, synchronous: what it displays goes out as it returns, with
    /// no later flush to schedule (the fan-out's path).
    private func deliver<Value>(_ value: Value, _ onChange: @Sendable (isolated Session, Value) -> Void) {
        guard !closed else { return }
        let outer = flushesDisplaysAtEnd
        flushesDisplaysAtEnd = true
        onChange(self, value)
        flushesDisplaysAtEnd = outer
        if !outer { flushDisplays() }
    }
}
