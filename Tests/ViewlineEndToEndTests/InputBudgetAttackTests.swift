import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Hostile-input round four against the real server: what one connection holds on the
/// way in is its ``InputBudget`` at most, however it frames its bytes.
@Suite(.blocksItsThread) struct InputBudgetAttackTests {
    /// Blank lines cost nothing to run but used to cost a queued input each: one wakeup's
    /// reads of `\n` (4 × 64 KiB) became 262,144 inputs, ~20 MB per connection, and 200
    /// such connections from one address ended the server. Now a blank line is skipped
    /// as it is framed, and any other line queues only within the budget.
    @Test func blankLineBurstsFromManyConnectionsCostBoundedMemory() throws {
        let server = try startServer()
        let probe = try connect(server)
        let attackers = try (0..<4).map { _ in try connect(server) }
        let burst = [UInt8](repeating: UInt8(ascii: "\n"), count: 160 * 1024)
        let growth = try AttackTests.peakGrowth(of: server.process.processIdentifier) {
            for attacker in attackers { _ = attacker.send(burst, within: .seconds(10)) }
            for attacker in attackers { try attacker.send("ping") }
            for attacker in attackers { #expect(try attacker.next(timeout: .seconds(60))["result"]?["pong"] == true) }
        }
        // Each connection: at most 256 KiB of queue and one wakeup's raw reads, 4 of them
        // under 4 MiB, with 4 MiB of slack for a debug build (the old path queued every
        // line of a wakeup's reads: ~12 MB per connection here).
        #expect(growth < 8 << 20, "RSS grew \(growth) bytes")
        #expect(try probe.command("ping")["result"]?["pong"] == true)
    }

    /// A text frame without FIN, then continuation frames without FIN, each under the
    /// frame limit, sent in pieces that end mid-frame: the message is discarded as too
    /// long, and the server holds one frame at most, not every byte sent (RSS grew 1:1
    /// and a 2 GiB cap ended the server).
    @Test func anEndlessFragmentedWebSocketMessageHoldsOneFrameAtMost() throws {
        let server = try startServer(["--web-port", "0"])
        let web = try #require(server.webPort)
        let socket = try WebSocketClient(port: web)
        _ = try socket.next()  // welcome
        let fragment = 60 * 1024
        let growth = try AttackTests.peakGrowth(of: server.process.processIdentifier) {
            try socket.connection.sendRaw(WebSocketClient.frame(opcode: 0x1, payload: [UInt8](repeating: 0x61, count: fragment), fin: false))
            let continuation = WebSocketClient.frame(opcode: 0x0, payload: [UInt8](repeating: 0x62, count: fragment), fin: false)
            for _ in 0..<800 {  // 48 MiB in all, each frame split across two writes
                try socket.connection.sendRaw(Array(continuation.prefix(fragment / 2 + 7)))
                try socket.connection.sendRaw(Array(continuation.dropFirst(fragment / 2 + 7)))
            }
            try socket.sendFrame(opcode: 0x0, payload: Array("end".utf8), fin: true)
            // The message was too long: `line_too_long`, and the connection goes on.
            #expect(try socket.next(timeout: .seconds(30))["error"]?["code"] == "line_too_long")
            try socket.send("ping")
            #expect(try socket.next()["result"]?["pong"] == true)
        }
        #expect(growth < 8 << 20, "RSS grew \(growth) bytes for 48 MiB sent")
    }
}
