/// Reading and changing view states: the ReactorKit loop in one call
/// (`session.update(Search.self) { $0.loading = true }` mutates, then displays).
extension Session {
    /// The current state of a view-model in this session.
    public func state<Model: ViewModel>(_ model: Model.Type) -> Model.State {
        states[application.index(of: model)] as! Model.State
    }

    /// Changes a view-model's state and, unless `display` is false, shows the
    /// client the new state (a `display` event with the next `rev`).
    ///
    /// From background work that was replaced or cancelled (``run(_:_:)``), the change
    /// is made to a scratch copy and dropped: the latest work wins.
    @discardableResult
    public func update<Model: ViewModel, Result>(
        _ model: Model.Type, display: Bool = true, _ change: (inout Model.State) throws -> Result
    ) rethrows -> Result {
        let index = application.index(of: model)
        if isStaleWork {
            var scratch = states[index] as! Model.State
            return try change(&scratch)
        }
        var state = states[index] as! Model.State
        states[index] = 0  // keep the state uniquely referenced while it changes
        defer { states[index] = state }
        let result = try change(&state)
        states[index] = state
        if display { self.display(index) }
        return result
    }

    /// Shows the client a view's current state again (not from replaced background work).
    public func display<Model: ViewModel>(_ model: Model.Type) {
        guard !isStaleWork else { return }
        display(application.index(of: model))
    }

    /// Whether the view has been displayed in this session, on this node or (for a
    /// session restored from its record) on the one before: a view the user opened,
    /// which ``ViewModel/restored(in:)`` may start following its data again, whatever
    /// its restored state looks like.
    public func hasDisplayed<Model: ViewModel>(_ model: Model.Type) -> Bool {
        displayedViews.contains(application.index(of: model))
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
