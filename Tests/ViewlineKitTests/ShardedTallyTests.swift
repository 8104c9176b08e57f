import Foundation
import Testing
@testable import ViewlineKit

/// The per-thread counters behind `/metrics`: adds from many threads at once are
/// all counted, and the command figures come out in the Prometheus text format.
@Suite struct ShardedTallyTests {
    @Test func addsFromManyThreadsAtOnceAreAllCounted() {
        let tally = ShardedTally(slots: 3, shards: 4)
        // Eight threads of their own (more threads than shards: some share one).
        let done = DispatchGroup()
        for _ in 0..<8 {
            done.enter()
            Thread.detachNewThread {
                for value in 1...10_000 {
                    tally.add(1, to: 0)
                    tally.add(value, to: 2)
                }
                done.leave()
            }
        }
        done.wait()
        #expect(tally.sum(0) == 80_000)
        #expect(tally.sum(1) == 0)
        #expect(tally.sum(2) == 8 * 50_005_000)
    }

    @Test func commandFiguresAreAHistogramAndCountsPerOutcome() {
        let metrics = ServerMetrics(commandNames: ["ping", "search"])
        metrics.command("ping", failed: nil, duration: .microseconds(50))
        metrics.command("ping", failed: nil, duration: .milliseconds(2))
        metrics.command("teleport", failed: "unknown_command", duration: nil)
        metrics.command("search", failed: "bad_arguments", duration: .microseconds(300))
        let text = String(
            decoding: metrics.exposition(
                sessions: SessionRegistry(limits: SessionLimits()), connections: ConnectionCounts(), eventLoopCount: 1, cluster: nil), as: UTF8.self)
        let lines = Set(text.split(separator: "\n").map(String.init))
        for expected in [
            #"viewline_commands_total{command="ping",outcome="ok"} 2"#,
            #"viewline_commands_total{command="unknown",outcome="unknown_command"} 1"#,
            #"viewline_commands_total{command="search",outcome="bad_arguments"} 1"#,
            #"viewline_command_duration_seconds_bucket{command="ping",le="0.0001"} 1"#,
            #"viewline_command_duration_seconds_bucket{command="ping",le="0.001"} 1"#,
            #"viewline_command_duration_seconds_bucket{command="ping",le="0.005"} 2"#,
            #"viewline_command_duration_seconds_bucket{command="ping",le="+Inf"} 2"#,
            #"viewline_command_duration_seconds_sum{command="ping"} 0.00205"#,
            #"viewline_command_duration_seconds_count{command="ping"} 2"#,
            #"viewline_command_duration_seconds_count{command="search"} 1"#,
        ] {
            #expect(lines.contains(expected), "\(expected)\n\(text)")
        }
        #expect(text.components(separatedBy: "# TYPE viewline_commands_total ").count == 2, "one family, once")
        #expect(metrics.commandCounts["ping"] == ["ok": 2])
    }

    @Test(arguments: [(Int64(100_000), "0.0001"), (5_000_000_000, "5.0"), (1_250_000_000, "1.25"), (0, "0.0")])
    func secondsAreWrittenExactly(nanoseconds: Int64, text: String) {
        #expect(ServerMetrics.seconds(nanoseconds) == text)
    }
}
