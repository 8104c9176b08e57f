import Foundation
import Logging
import NIOCore
import NIOPosix
import Synchronization
import Testing
import ViewlineTestSupport

@testable import ViewlineKit

#if canImport(Glibc)
    import Glibc
#endif

/// A connection's output is bounded by `--max-output-bytes` against a client that
/// stops reading, yet a single line larger than that budget (a large session's
/// `attach` snapshot) reaches a client that reads it: the budget bounds the backlog,
/// not the size of one line.
@Suite(.blocksItsThread) struct OutboundLinesTests {
    /// A server socket whose accepted channel sends through `OutboundLines` with a
    /// 64 KiB budget and a small kernel send buffer, so the backlog stays in NIO.
    final class Harness: Sendable {
        let group = MultiThreadedEventLoopGroup(numberOfThreads: 1)
        final class Accepted: Sendable {
            let channel = Mutex<(any Channel)?>(nil)
            let outbound = Mutex<OutboundLines?>(nil)
        }
        let counts = ConnectionCounts()
        let accepted = Accepted()
        let port: Int
        let listener: any Channel
        static let budget = 64 * 1024

        init() throws {
            let accepted = accepted
            listener = try ServerBootstrap(group: group)
                .childChannelOption(.writeBufferWaterMark, value: .init(low: Self.budget / 2, high: Self.budget))
                .childChannelOption(.socketOption(.so_sndbuf), value: 4096)
                .childChannelInitializer { channel in
                    accepted.channel.withLock { $0 = channel }
                    return channel.eventLoop.makeSucceededVoidFuture()
                }
                .bind(host: "127.0.0.1", port: 0).wait()
            port = listener.localAddress!.port!
        }

        /// A client with a small receive buffer, and the server side's output.
        func connect(
            lease: (@Sendable () -> ContinuousClock.Instant?)? = nil
        ) throws -> (client: Int32, outbound: OutboundLines, channel: any Channel) {
            let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            var small: Int32 = 4096
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &small, socklen_t(MemoryLayout<Int32>.size))
            var address = sockaddr_in()
            address.sin_family = sa_family_t(AF_INET)
            address.sin_port = UInt16(port).bigEndian
            inet_pton(AF_INET, "127.0.0.1", &address.sin_addr)
            let connected = withUnsafePointer(to: &address) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
            }
            #expect(connected == 0)
            var channel: (any Channel)?
            for _ in 0..<200 where channel == nil {
                channel = accepted.channel.withLock { $0 }
                if channel == nil { usleep(5_000) }
            }
            let server = try #require(channel)
            // Handed over by the initializer before the loop made it active: a test
            // whose loop sends `where channel.isActive` would otherwise skip every line
            // (it did, under CI's load, and then waited for a close that never came).
            for _ in 0..<2_000 where !server.isActive { usleep(5_000) }
            #expect(server.isActive)
            let outbound = OutboundLines(channel: server, logger: Logger(label: "test"), counts: counts, limit: Self.budget, lease: lease)
            accepted.outbound.withLock { $0 = outbound }
            return (fd, outbound, server)
        }

        deinit {
            try? listener.close().wait()
            try? group.syncShutdownGracefully()
        }
    }

    /// Whether `channel` closed within `seconds`: a connection that is never cut off
    /// fails its test instead of holding the whole run.
    static func closes(_ channel: any Channel, within seconds: Int = 30) -> Bool {
        for _ in 0..<(seconds * 100) where channel.isActive { usleep(10_000) }
        return !channel.isActive
    }

    /// Reads until end of file or `limit` bytes; returns how many came.
    static func readAll(_ fd: Int32, limit: Int) -> Int {
        var total = 0
        var buffer = [UInt8](repeating: 0, count: 65_536)
        while total < limit {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count <= 0 { break }
            total += count
        }
        return total
    }

    @Test func aLineLargerThanTheBudgetReachesAClientThatReadsIt() throws {
        let harness = try Harness()
        let (fd, outbound, channel) = try harness.connect()
        defer { close(fd) }
        // 1 MiB: sixteen times the budget, in one line.
        let line = [UInt8](repeating: UInt8(ascii: "x"), count: 1 << 20) + [UInt8(ascii: "\n")]
        outbound.send(line)
        #expect(Self.readAll(fd, limit: line.count) == line.count)
        #expect(channel.isActive)
    }

    @Test func aClientThatStopsReadingIsCutOffOnceTheBacklogPassesTheBudget() throws {
        let harness = try Harness()
        let (fd, outbound, channel) = try harness.connect()
        defer { close(fd) }
        // A large line first (allowed whole), then a flood the client never reads.
        outbound.send([UInt8](repeating: UInt8(ascii: "y"), count: 256 * 1024) + [UInt8(ascii: "\n")])
        let small = [UInt8](repeating: UInt8(ascii: "z"), count: 1023) + [UInt8(ascii: "\n")]
        for _ in 0..<2_000 where channel.isActive {
            outbound.send(small)
            usleep(100)
        }
        #expect(Self.closes(channel), "the connection was cut off")
        // What reached the socket before the cut is far less than the flood.
        #expect(Self.readAll(fd, limit: 8 << 20) < 256 * 1024 + Harness.budget * 4)
    }

    /// Many small flushes to a client that does not read are merged and counted at the
    /// memory they hold: the connection is cut off near its budget, not after holding
    /// a buffer of 256 bytes or more for every 20-byte line (round five: 5.2 MiB held
    /// per connection against a 1 MiB budget).
    @Test func smallFlushesToAClientThatDoesNotReadAreMergedAndCountedAtTheirCapacity() throws {
        let harness = try Harness()
        let (fd, outbound, channel) = try harness.connect()
        defer { close(fd) }
        let event = Array(#"{"type":"display","rev":1}"#.utf8) + [UInt8(ascii: "\n")]
        var sent = 0
        for _ in 0..<200_000 where channel.isActive {
            outbound.send(event)
            sent += event.count
            // One line per loop tick: a flush each, as events to many sessions come.
            if sent % (event.count * 64) == 0 { usleep(200) }
        }
        #expect(Self.closes(channel), "the connection was cut off")
        // Cut off within a few budgets of bytes sent (the kernel takes some first).
        #expect(sent < 16 * Harness.budget, "sent \(sent) bytes before the cut")
    }

    /// In a cluster, output queued while the lease was valid and written only after it
    /// ran out (the node paused in between) is dropped with the connection: a reply
    /// must not acknowledge anything once another node may own the session.
    @Test func outputThatOutlivesTheLeaseItWasMadeUnderIsDroppedWithTheConnection() throws {
        let harness = try Harness()
        let leaseEnds = ContinuousClock.now + .milliseconds(20)
        let (fd, outbound, channel) = try harness.connect(lease: { leaseEnds })
        defer { close(fd) }
        // The loop stalls (a paused process) between the reply being made and written:
        // its flush comes after the stall, past the lease, whenever this thread runs.
        channel.eventLoop.execute { usleep(100_000) }
        outbound.send(Array(#"{"type":"reply","ok":true}"#.utf8) + [UInt8(ascii: "\n")])
        for _ in 0..<1000 where channel.isActive { usleep(5_000) }
        #expect(!channel.isActive, "the connection was closed")
        #expect(Self.readAll(fd, limit: 1 << 20) == 0, "nothing reached the client")
        // Written in time, it goes out as usual (a harness takes one connection).
        let inTime = try Harness()
        let (fd2, outbound2, channel2) = try inTime.connect(lease: { .now + .seconds(60) })
        defer { close(fd2) }
        outbound2.send(Array("pong\n".utf8))
        #expect(Self.readAll(fd2, limit: 5) == 5)
        #expect(channel2.isActive)
    }

    /// `info`'s output backlog: a connection whose client reads slower than it is
    /// written to is counted with what it holds, and leaves the count once it drains
    /// or closes; a connection that keeps up is never in it.
    @Test func aConnectionPastItsWatermarkIsInTheOutputBacklogUntilItDrains() throws {
        let harness = try Harness()
        let (fd, outbound, channel) = try harness.connect()
        defer { close(fd) }
        outbound.send([UInt8](repeating: UInt8(ascii: "x"), count: 100) + [UInt8(ascii: "\n")])
        #expect(Self.readAll(fd, limit: 101) == 101)
        #expect(harness.counts.outputBacklog.connections == 0)
        // Four times the budget in one line, unread: the connection backs up.
        let line = [UInt8](repeating: UInt8(ascii: "y"), count: 4 * Harness.budget) + [UInt8(ascii: "\n")]
        outbound.send(line)
        for _ in 0..<200 where harness.counts.outputBacklog.connections == 0 { usleep(5_000) }
        let backlog = harness.counts.outputBacklog
        #expect(backlog.connections == 1 && backlog.bytes > Harness.budget)
        // The client reads it all: the connection drains and leaves the backlog.
        #expect(Self.readAll(fd, limit: line.count) == line.count)
        for _ in 0..<200 where harness.counts.outputBacklog.connections > 0 { usleep(5_000) }
        #expect(harness.counts.outputBacklog.connections == 0)
        // Backed up again, then closed: it leaves with its channel.
        outbound.send(line)
        for _ in 0..<200 where harness.counts.outputBacklog.connections == 0 { usleep(5_000) }
        #expect(harness.counts.outputBacklog.connections == 1)
        try channel.close().wait()
        for _ in 0..<200 where harness.counts.outputBacklog.connections > 0 { usleep(5_000) }
        #expect(harness.counts.outputBacklog == (0, 0))
    }

    /// A backed-up connection whose client goes away leaves the backlog even when its
    /// output object is gone before the close completes (as the server's is, once the
    /// connection is finished).
    @Test func aBackedUpConnectionWhoseClientLeavesLeavesTheBacklog() throws {
        let harness = try Harness()
        let (fd, channel): (Int32, any Channel) = try {
            let (fd, outbound, channel) = try harness.connect()
            outbound.send([UInt8](repeating: UInt8(ascii: "y"), count: 4 * Harness.budget) + [UInt8(ascii: "\n")])
            return (fd, channel)
        }()
        for _ in 0..<200 where harness.counts.outputBacklog.connections == 0 { usleep(5_000) }
        #expect(harness.counts.outputBacklog.connections == 1)
        harness.accepted.outbound.withLock { $0 = nil }  // nothing holds the output now
        close(fd)
        #expect(Self.closes(channel), "the connection closed")
        for _ in 0..<200 where harness.counts.outputBacklog.connections > 0 { usleep(5_000) }
        #expect(harness.counts.outputBacklog == (0, 0))
    }
}
