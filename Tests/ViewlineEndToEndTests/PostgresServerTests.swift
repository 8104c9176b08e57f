import Glibc
import Testing
import ViewlineTestSupport

/// The throwaway PostgreSQL a test starts takes none of the test process's
/// descriptors along. NIO's accepted sockets are not close-on-exec: a postmaster
/// started by one suite while another suite's server had a connection open held
/// that connection open after the server closed it, and CI's shutdown test waited
/// 5 s for a close that never came.
@Suite(.blocksItsThread) struct PostgresServerTests {
    @Test func aPostgreSQLStartedMeanwhileHoldsNoneOfTheProcesssSockets() throws {
        var ends: [Int32] = [-1, -1]
        #expect(socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &ends) == 0)  // not close-on-exec
        defer { close(ends[1]) }
        let server = try PostgresServer()
        defer { server.stop() }
        close(ends[0])
        // The other end reads its end of stream at once: nobody else holds the socket.
        var pfd = pollfd(fd: ends[1], events: Int16(POLLIN), revents: 0)
        try #require(poll(&pfd, 1, 2000) == 1)
        var byte: UInt8 = 0
        #expect(read(ends[1], &byte, 1) == 0)
    }
}
