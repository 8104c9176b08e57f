/// Reading and changing view states by the view's index: the runtime side of
/// ``ViewSession/update(display:_:)`` (the ReactorKit loop in one call).
extension Session {
    /// Changes the state at `index` and, unless `display` is false, shows the client
    /// the new state (a `display` event with the next `rev`). From background work
    /// that was replaced or cancelled, the change is made to a scratch copy and dropped.
    func update<State: Sendable, Result>(
        _ index: Int, as type: State.Type, display: Bool, _ change: (inout State) throws -> Result
    ) rethrows -> Result {
        // Replaced work's change, or one of this view-model from inside its own update
        // (the outer change holds the state): made to a copy and dropped; the latter
        // said in the log (the change belongs in the outer closure, which has the state).
        if isStaleWork || changingState(index) != nil {
            if !isStaleWork {
                logger.error(
                    "a view-model updated its state inside its own update; that inner change is dropped",
                    metadata: ["view": "\(application.views[index].name)"])
            }
            var scratch = currentState(index) as! State
            return try change(&scratch)
        }
        var state = states[index] as! State
        states[index] = 0  // keep the state uniquely referenced while it changes
        defer { states[index] = state }
        let result = try withUnsafeMutablePointer(to: &state) { pointer in
            // What the change reads of its own view-model (its `state`, a `display`)
            // is the state as it is changing.
            try withUnsafePointer(to: StateChange(index: index, state: UnsafeMutableRawPointer(pointer), outer: changing)) { frame in
                changing = frame
                defer { changing = frame.pointee.outer }
                return try change(&pointer.pointee)
            }
        }
        states[index] = state
        if display { self.display(index) }
        return result
    }

    /// The state of the view at `index` now: the one being changed, during its change.
    func currentState(_ index: Int) -> any Sendable {
        if let changed = changingState(index) { return application.viewCodings[index].copyState(changed) }
        return states[index]
    }

    /// Where the state at `index` is while its change runs; `nil` when it is not
    /// changing.
    private func changingState(_ index: Int) -> UnsafeMutableRawPointer? {
        var frame = changing
        while let current = frame {
            if current.pointee.index == index { return current.pointee.state }
            frame = current.pointee.outer
        }
        return nil
    }

    /// A view-model's current state in this session (for tests and tools; view-model
    /// code reads ``ViewSession/state``).
    package func state<Model: ViewModel>(_ model: Model.Type) -> Model.State {
        currentState(application.index(of: model)) as! Model.State
    }

    /// Whether a view-model's view has been displayed in this session.
    package func hasDisplayed<Model: ViewModel>(_ model: Model.Type) -> Bool {
        displayedViews.contains(application.index(of: model))
    }

    /// Shows the client a view's current state again, unless from replaced background work.
    func displayUnlessStale(_ index: Int) {
        guard !isStaleWork else { return }
        display(index)
    }

    /// Shows the client the view's state once the work running now reaches its end or
    /// an await: a command, or a slice of background work, that changes a view
    /// several times sends its last state once, in order with the other events
    /// (any other event, a reply or a command beginning sends it first).
    func display(_ index: Int) {
        displayedViews.insert(index)
        guard pendingDisplay != index, !morePendingDisplays.contains(index) else { return }
        guard pendingDisplay < 0 else { return morePendingDisplays.append(index) }
        pendingDisplay = index
        guard !flushesDisplaysAtEnd else { return }
        // The job that runs now ends at its next await: the loop runs this after it.
        eventLoop.execute { self.assumeIsolated { $0.flushDisplays() } }
    }

    /// Sends each view changed since the last flush, with its state now, as a
    /// `display` with the next `rev`.
    func flushDisplays() {
        guard pendingDisplay >= 0 else { return }
        let first = pendingDisplay
        let more = morePendingDisplays
        pendingDisplay = -1
        if !more.isEmpty { morePendingDisplays = [] }
        guard !closed else { return }
        sendDisplay(first)
        for index in more { sendDisplay(index) }
    }

    /// A view's state now, as a `display` with the next `rev`.
    private func sendDisplay(_ index: Int) {
        let view = application.viewCodings[index]
        let state = view.encodeState(currentState(index))
        // Equal to another session's: share its storage (not while it changes).
        if let canonical = state.canonical, changing == nil { states[index] = canonical }
        (lastEncodedView, lastEncodedBytes) = (index, state.bytes)
        emitDisplay(viewPart: view.displayViewPart, state: state)
    }

    /// A view's state as the client sees it, and its encoding.
    func encodedState(_ index: Int) -> EncodedState {
        application.viewCodings[index].encodeState(currentState(index))
    }

    /// A view's state's encoding: the one kept since the view was last encoded, while
    /// no state changed.
    func encodedBytes(_ index: Int) -> [UInt8] {
        if index == lastEncodedView { return lastEncodedBytes }
        let bytes = encodedState(index).bytes
        (lastEncodedView, lastEncodedBytes) = (index, bytes)
        return bytes
    }
}

/// A state change running (``Session/update(_:as:display:_:)``): the view, where its
/// state is while it changes, and the change it runs inside.
struct StateChange {
    let index: Int
    let state: UnsafeMutableRawPointer
    let outer: UnsafePointer<StateChange>?
}
