/// What the runtime reads of a view on every `display` and `state` reply: how its
/// state is encoded and copied, and the bytes that name it. One shared object per
/// view, so reading it copies one reference; reading a ``ViewDescription`` out of
/// ``Application/views`` copies the whole description (a dozen strings, arrays and
/// closures, each retained and released, on a value every event loop shares).
final class ViewCoding: Sendable {
    let encodeState: @Sendable (any Sendable) -> EncodedState
    /// A copy of the state at `pointer` (one being changed by ``Session/update(_:as:display:_:)``).
    let copyState: @Sendable (UnsafeRawPointer) -> any Sendable
    /// `{"view":"<name>","state":`: how `state`'s reply for this view begins.
    let stateReplyHead: [UInt8]
    /// `,"view":"<name>","state":`: what follows the `rev` in this view's displays.
    let displayViewPart: [UInt8]

    init(_ view: ViewDescription) {
        encodeState = view.encodeState
        copyState = view.copyState
        stateReplyHead = view.stateReplyHead
        displayViewPart = view.displayViewPart
    }
}
