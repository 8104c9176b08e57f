import Testing
@testable import ViewlineKit

/// One change shown by many sessions is encoded once, and the sessions keep one copy.
@Suite struct EncodedStateCacheTests {
    @Test func equalStatesShareOneEncodingAndAChangeEncodesAgain() throws {
        let cache = EncodedStateCache<Counter.State>()
        var encodes = 0
        func encode(_ state: Counter.State) -> [UInt8] {
            encodes += 1
            return try! JSON.bytes(encoding: state)
        }
        let first = cache.encode(Counter.State(count: 1), with: encode)
        let second = cache.encode(Counter.State(count: 1), with: encode)
        #expect(encodes == 1)
        #expect(second.bytes == first.bytes)
        let changed = cache.encode(Counter.State(count: 2), with: encode)
        #expect(encodes == 2)
        #expect(changed.json == ["count": 2, "label": "", "busy": false])
        #expect(changed.bytes == Array(#"{"count":2,"label":"","busy":false}"#.utf8))
        // The last few states are kept: sessions going through the same steps in
        // turn (a search's loading, then its results) still find each.
        let again = cache.encode(Counter.State(count: 1), with: encode)
        #expect(encodes == 2)
        #expect(again.canonical as? Counter.State == Counter.State(count: 1), "the kept state, to share its storage")
        for count in 3...(2 + EncodedStateCache<Counter.State>.capacity) {
            _ = cache.encode(Counter.State(count: count), with: encode)
        }
        _ = cache.encode(Counter.State(count: 1), with: encode)  // pushed out by newer ones
        #expect(encodes == 3 + EncodedStateCache<Counter.State>.capacity)
    }
}
