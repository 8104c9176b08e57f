import Testing
import ViewlineProtocol

@testable import ViewlineClient

/// The welcome's `maxLineBytes` is a limit only as a positive whole number: a hostile
/// or broken server cannot make the client refuse every command (0, a negative) or
/// trap it (a huge number).
@Suite struct LineLimitTests {
    @Test func onlyAPositiveWholeNumberIsALimit() throws {
        #expect(ViewlineClient.lineLimit(["maxLineBytes": 65_536]) == 65_536)
        #expect(ViewlineClient.lineLimit(["maxLineBytes": 64.0]) == 64)
        for hostile: JSON in [0, -1, 1.5, "64", true, .null, 1e300, -1e300] {
            #expect(ViewlineClient.lineLimit(["maxLineBytes": hostile]) == nil, "\(hostile)")
        }
        #expect(ViewlineClient.lineLimit([:]) == nil)
    }
}
