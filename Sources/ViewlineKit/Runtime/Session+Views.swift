/// Reading and changing view states by the view's index: the runtime side of
/// ``ViewSession/update(display:_:)`` (the ReactorKit loop in one call).
extension Session {
    /// Changes the state at `index` and, unless `display` is false, shows the client
    /// the new state (a `display` event with the next `rev`). From background work
    /// that was replaced or cancelled, the change is made to a scratch copy and dropped.
    func update<State: Sendable, Result>(
        _ index: Int, as type: State.Type, display: Bool, _ change: (inout State) throws -> Result
    ) rethrows -> Result {
        if isStaleWork {
            var scratch = states[index] as! State
            return try change(&scratch)
        }
        var state = states[index] as! State
        states[index] = 0  // keep the state uniquely referenced while it changes
        defer { states[index] = state }
        let result = try change(&state)
        states[index] = state
        if display { self.display(index) }
        return result
    }

    /// A view-model's current state in this session (for tests and tools; view-model
    /// code reads ``ViewSession/state``).
    package func state<Model: ViewModel>(_ model: Model.Type) -> Model.State {
        states[application.index(of: model)] as! Model.State
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

    func display(_ index: Int) {
        displayedViews.insert(index)
        let view = application.views[index]
        let state = view.encodeState(states[index])
        if let canonical = state.canonical { states[index] = canonical }  // equal: share its storage
        (lastEncodedView, lastEncodedBytes) = (index, state.bytes)
        emitDisplay(viewPart: view.displayViewPart, state: state)
    }

    /// A view's state as the client sees it, and its encoding.
    func encodedState(_ index: Int) -> EncodedState {
        application.views[index].encodeState(states[index])
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
