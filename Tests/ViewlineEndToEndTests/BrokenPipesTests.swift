#if canImport(Glibc)
    import Glibc
#endif
import Testing
@testable import ViewlineTestSupport

/// A test that writes to a peer that has gone fails alone: the write is an error, and
/// the test process (every other test with it) is not ended by `SIGPIPE`.
@Suite(.blocksItsThread) struct BrokenPipesTests {
    @Test func aWriteToAPeerThatHasGoneIsAnErrorNotTheEndOfTheProcess() throws {
        _ = BrokenPipes.ignored
        var action = sigaction()
        #expect(sigaction(SIGPIPE, nil, &action) == 0)
        let handler = action.__sigaction_handler.sa_handler.map { unsafeBitCast($0, to: Int.self) }
        #expect(handler == 1)  // SIG_IGN

        var ends: [Int32] = [-1, -1]
        try #require(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)
        defer { close(ends[1]) }
        close(ends[0])
        var byte: UInt8 = 0x0A
        #expect(write(ends[1], &byte, 1) == -1)
        #expect(errno == EPIPE)
    }
}
