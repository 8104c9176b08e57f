import Foundation
import Synchronization
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// One hostile client against the real server (PROTOCOL §8): each attack gets a
/// clear error or a cut-off connection, and costs bounded memory and CPU, while
/// another client's `ping` goes on being answered.
@Suite(.blocksItsThread) struct AttackTests {
    /// The server's resident memory in bytes, from /proc.
    static func residentBytes(_ pid: Int32) -> Int {
        let status = (try? String(contentsOfFile: "/proc/\(pid)/status", encoding: .utf8)) ?? ""
        let line = status.split(separator: "\n").first { $0.hasPrefix("VmRSS:") } ?? ""
        return (Int(line.split(separator: " ").dropFirst().first ?? "") ?? 0) * 1024
    }

    /// The peak growth of `pid`'s resident memory while `attack` runs, in bytes (sampled
    /// every millisecond: VmHWM would report start-up's).
    static func peakGrowth(of pid: Int32, during attack: () throws -> Void) throws -> Int {
        let before = residentBytes(pid)
        let peak = Mutex(before)
        let sampling = Mutex(true)
        let sampler = Thread {
            while sampling.withLock({ $0 }) {
                let now = residentBytes(pid)
                peak.withLock { $0 = max($0, now) }
                usleep(1000)
            }
        }
        sampler.start()
        defer { sampling.withLock { $0 = false } }
        try attack()
        usleep(100_000)
        return peak.withLock { $0 } - before
    }

    /// The slowest of `count` pings on `client`, in milliseconds.
    func slowestPing(_ client: LineClient, count: Int) throws -> Double {
        var slowest = 0.0
        for _ in 0..<count {
            let start = ContinuousClock.now
            #expect(try client.command("ping")["result"]?["pong"] == true)
            let elapsed = ContinuousClock.now - start
            slowest = max(slowest, Double(elapsed.components.attoseconds) / 1e15 + Double(elapsed.components.seconds) * 1000)
        }
        return slowest
    }

    @Test func deeplyNestedAndWideJSONGetsBadRequestWithoutStallingOthers() throws {
        let server = try startServer()
        let attacker = try connect(server)
        let victim = try connect(server)
        // 30 KB of nesting, 4,097 values, 257 keys: each refused in one pass.
        let nested = "{\"cmd\":\"ping\",\"args\":" + String(repeating: "{\"a\":", count: 6000) + "1" + String(repeating: "}", count: 6001)
        let wide = "{\"cmd\":\"ping\",\"args\":{\"a\":[" + Array(repeating: "0", count: 5000).joined(separator: ",") + "]}}"
        let keys = "{\"cmd\":\"ping\",\"args\":{" + (0..<300).map { "\"k\($0)\":0" }.joined(separator: ",") + "}}"
        let burst = Array(repeating: nested, count: 20) + Array(repeating: wide, count: 20) + Array(repeating: keys, count: 20)
        try attacker.sendRaw(Array((burst.joined(separator: "\n") + "\n").utf8))
        let slowest = try slowestPing(victim, count: 50)
        for _ in burst {
            #expect(try attacker.next(timeout: .seconds(10)).errorCode == "bad_request")
        }
        #expect(slowest < 500, "a victim's ping took \(slowest) ms during the attack")
        #expect(try attacker.command("ping").isOK)
    }

    @Test func anOverlongSearchQueryIsRefused() throws {
        let server = try startServer()
        let client = try connect(server)
        let reply = try client.command("search " + String(repeating: "pizza ", count: 300))
        #expect(reply.errorCode == "bad_arguments")
        #expect(try client.command("search " + String(repeating: "x", count: 256)).isOK)
    }

    @Test func aClientThatPipelinesHugeRepliesAndNeverReadsIsCutOffWithinItsBudget() throws {
        let limit = 256 * 1024
        let server = try startServer(["--max-output-bytes", "\(limit)"])
        let (attacker, token) = try { () throws -> (LineClient, String) in
            let client = try LineClient(port: server.port)
            return (client, try #require(try client.next()["token"]?.stringValue))
        }()
        #expect(try attacker.command("search golden").isOK)  // a large state: 20 results
        _ = try attacker.read(until: { $0["state"]?["loading"] == false })
        let growth = try Self.peakGrowth(of: server.process.processIdentifier) { () throws in
            // 262 KB of `state` lines: each reply is every view's state (3.4 KB); it never reads.
            try attacker.sendRaw(Array(String(repeating: "state\n", count: 43_700).utf8))
            #expect(try attacker.isClosedByPeer(timeout: .seconds(30)))
            usleep(100_000)
        }
        // Under 2 × the backlog limit + 1 MiB (the bound), plus 2 MiB of slack
        // for a debug build's allocator; the old pump grew ~10 MB here.
        #expect(growth < 2 * limit + 3 << 20, "RSS grew \(growth) bytes")
        // The session lives on.
        let other = try connect(server)
        #expect(try other.command("attach \(token)")["result"]?["session"] == "s1")
    }

    @Test func aLineLeftIncompleteIsCutOffAndItsSessionLivesOn() throws {
        let server = try startServer(["--line-timeout", "1"])
        let client = try LineClient(port: server.port)
        let token = try #require(try client.next()["token"]?.stringValue)
        try client.sendRaw(Array(String(repeating: "x", count: 50_000).utf8))  // no newline, ever
        #expect(try client.isClosedByPeer(timeout: .seconds(10)))
        let other = try connect(server)
        #expect(try other.command("attach \(token)")["result"]?["session"] == "s1")
        // A client that finishes its lines is never cut off, however slowly it types.
        let typist = try connect(server)
        try typist.sendRaw(Array("pi".utf8))
        usleep(600_000)
        try typist.sendRaw(Array("ng\n".utf8))
        #expect(try typist.next()["result"]?["pong"] == true)
        usleep(700_000)
        #expect(try typist.command("ping").isOK)
    }

    @Test func oneAddressChurningConnectionsEvictsOnlyItsOwnSessions() throws {
        let server = try startServer(["--max-sessions", "50"])
        // The victim (from 127.0.0.2) leaves a detached session: the oldest of all.
        var (victim, token): (LineClient?, String) = try {
            let client = try LineClient(port: server.port, from: "127.0.0.2")
            return (client, try #require(try client.next()["token"]?.stringValue))
        }()
        #expect(try victim?.command("search pizza").isOK == true)
        victim = nil
        usleep(100_000)
        // The attacker (127.0.0.3) opens and drops 500 connections, 10× the cap.
        for _ in 0..<500 {
            let client = try LineClient(port: server.port, from: "127.0.0.3")
            _ = try client.next()
        }
        usleep(200_000)
        // Plain LRU would have evicted the victim first; the attacker evicted its own.
        let back = try LineClient(port: server.port, from: "127.0.0.2")
        _ = try back.next()
        let reply = try back.command("attach \(token)")
        #expect(reply["result"]?["session"] == "s1", "\(reply.encoded)")
    }

    @Test func oneAddressCannotHoldEveryClientSlot() throws {
        let server = try startServer(["--max-clients-per-address", "3"])
        let held = try (0..<3).map { _ in try connect(server) }
        let refused = try LineClient(port: server.port)
        let bye = try refused.next()
        #expect(bye.type == "bye" && bye["reason"] == "max clients per address reached" && bye["code"] == "refused")
        #expect(try held[0].command("ping").isOK)
    }

    @Test func churningPastTheSessionCapLeaksNothing() throws {
        let server = try startServer(["--max-sessions", "1000", "--max-sessions-per-address", "0"])
        func churn(_ count: Int) throws {
            for _ in 0..<count {
                let client = try LineClient(port: server.port)
                _ = try client.next()
            }
        }
        try churn(3000)  // full, and warm
        // Two rounds: a leak grows the process in both, while a one-off growth of the
        // allocator's arenas (a loaded machine runs more threads at once) shows in one.
        var growth: [Double] = []
        for _ in 0..<2 {
            usleep(300_000)
            let before = Self.residentBytes(server.process.processIdentifier)
            try churn(10_000)
            usleep(300_000)
            growth.append(Double(Self.residentBytes(server.process.processIdentifier) - before) / 10_000)
        }
        // Evicted sessions leave nothing behind (it was ~750 bytes each).
        #expect(growth.min()! < 50, "RSS grew \(growth) bytes per evicted session")
    }

    @Test func aFloodOfWorstCaseSearchesDoesNotStallOthers() throws {
        let server = try startServer()
        // 256 bytes of long misspelt words: each one tried against the whole vocabulary.
        let query = (0..<21).map { "qwertyzx\($0 % 10)" }.joined(separator: " ").prefix(256)
        let attackers = try (0..<20).map { _ in try connect(server) }
        for attacker in attackers {
            try attacker.sendRaw(Array(String(repeating: "search \(query)\n", count: 20).utf8))
        }
        let victim = try connect(server)
        let slowest = try slowestPing(victim, count: 50)
        #expect(slowest < 500, "a victim's ping took \(slowest) ms during the search flood")
        let attach = try LineClient(port: server.port)
        let token = try #require(try attach.next()["token"]?.stringValue)
        let start = ContinuousClock.now
        #expect(try victim.command("attach \(token)")["result"]?["session"] != nil)
        #expect(ContinuousClock.now - start < .seconds(1))
    }
}
