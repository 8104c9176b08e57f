import Testing
@testable import ViewlineKit

/// One change shown by many sessions is encoded once.
@Suite struct EncodedStateCacheTests {
    @Test func equalStatesShareOneEncodingAndAChangeEncodesAgain() throws {
        let cache = EncodedStateCache<Counter.State>()
        var encodes = 0
        func encode(_ state: Counter.State) -> JSON {
            encodes += 1
            return try! JSON(encoding: state)
        }
        let first = cache.encode(Counter.State(count: 1), with: encode)
        let second = cache.encode(Counter.State(count: 1), with: encode)
        #expect(encodes == 1)
        #expect(second.bytes == first.bytes)
        let changed = cache.encode(Counter.State(count: 2), with: encode)
        #expect(encodes == 2)
        #expect(changed.json == ["count": 2, "label": "", "busy": false])
        #expect(changed.bytes == Array(#"{"count":2,"label":"","busy":false}"#.utf8))
        _ = cache.encode(Counter.State(count: 1), with: encode)  // only the last state is kept
        #expect(encodes == 3)
    }
}
