import Testing
import ViewlineKit

/// The one hex writer and reader of tokens, keys and digests.
@Suite struct HexTests {
    @Test func bytesRoundTripThroughLowercaseHex() {
        let bytes: [UInt8] = [0x00, 0x0f, 0x10, 0xab, 0xff]
        #expect(Hex.string(bytes) == "000f10abff")
        #expect(Hex.bytes("000f10abff") == bytes)
        #expect(Hex.bytes("000F10ABFF") == bytes, "either case is read")
        let all = (0...255).map { UInt8($0) }
        #expect(Hex.bytes(Hex.string(all)) == all)
    }

    @Test func anythingButPairsOfHexDigitsIsRefused() {
        #expect(Hex.bytes("abc") == nil, "an odd count")
        #expect(Hex.bytes("zz") == nil)
        #expect(Hex.bytes("0x10") == nil)
        #expect(Hex.bytes("") == [])
    }

    @Test func randomBytesAreFreshAndTwoDigitsEach() {
        let keys = (0..<100).map { _ in Hex.random(bytes: 32) }
        #expect(Set(keys).count == 100)
        #expect(keys.allSatisfy { $0.count == 64 && Hex.bytes($0)?.count == 32 })
    }
}
