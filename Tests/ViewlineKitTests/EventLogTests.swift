import Testing
import ViewlineProtocol
@testable import ViewlineKit

/// The replay log holds lines, bounded by what they really cost, and every log of a
/// server together stays within one budget.
@Suite struct EventLogTests {
    func line(_ rev: Int, bytes: Int) -> [UInt8] {
        Array("{\"type\":\"display\",\"rev\":\(rev),\"view\":\"v\",\"state\":\"".utf8) + Array(repeating: 0x61, count: bytes) + Array("\"}\n".utf8)
    }

    @Test func aLogKeepsItsNewestEventsWithinItsByteBound() {
        var log = EventLog(maximumEvents: 256, maximumBytes: 64 * 1024)
        for rev in 1...1000 { log.append(line(rev, bytes: 10_000), rev: rev) }
        #expect(log.bytes <= 64 * 1024)
        #expect(log.count == 6)
        #expect(log.lines(after: 994, current: 1000)?.count == 6)
        #expect(log.lines(after: 10, current: 1000) == nil, "dropped: a snapshot instead")
    }

    @Test func allLogsTogetherStayWithinTheBudgetTheGrowingOneGivingWayFirst() {
        let budget = EventLogBudget(limit: 100_000)
        var quiet = EventLog(maximumEvents: 256, maximumBytes: 64 * 1024, budget: budget)
        for rev in 1...5 { quiet.append(line(rev, bytes: 10_000), rev: rev) }
        var logs = (0..<10).map { _ in EventLog(maximumEvents: 256, maximumBytes: 64 * 1024, budget: budget) }
        for rev in 1...50 {
            for index in logs.indices { logs[index].append(line(rev, bytes: 10_000), rev: rev) }
        }
        // Within the budget, give or take the one event each log always keeps.
        #expect(budget.bytes <= 100_000 + 10 * 10_100)
        #expect(quiet.count == 5, "a log that does not grow keeps its events")
        for index in logs.indices { logs[index].removeAll() }
        quiet.removeAll()
        #expect(budget.bytes == 0)
    }

    @Test func oneAddressCannotSpendTheBudgetOthersReplayFrom() {
        let budget = EventLogBudget(limit: 400_000)
        // A victim's log, from its own address, within every limit.
        var victim = EventLog(maximumEvents: 256, maximumBytes: 64 * 1024, budget: budget, address: "192.0.2.1")
        for rev in 1...5 { victim.append(line(rev, bytes: 10_000), rev: rev) }
        // 30 sessions of one address, each filling its own log to its limit.
        var attackers = (0..<30).map { _ in EventLog(maximumEvents: 256, maximumBytes: 64 * 1024, budget: budget, address: "198.51.100.9") }
        for rev in 1...20 {
            for index in attackers.indices { attackers[index].append(line(rev, bytes: 10_000), rev: rev) }
        }
        // The attacker's address holds at most its quarter (give or take the one event
        // each log always keeps); the budget is never spent, so the victim's log is whole.
        let attacking = attackers.reduce(0) { $0 + $1.bytes }
        #expect(attacking <= 100_000 + 30 * 10_100, "\(attacking)")
        #expect(!budget.isOver)
        #expect(victim.count == 5 && victim.lines(after: 0, current: 5)?.count == 5)
        for index in attackers.indices { attackers[index].removeAll() }
        victim.removeAll()
        #expect(budget.bytes == 0)
    }

    @Test func aStateEncodingSharedByManyLogsCountsOnceAgainstTheBudget() {
        let budget = EventLogBudget(limit: 1 << 20)
        // One snapshot shown by 1,000 sessions: its 50 KB are held once, not 1,000 times.
        let shared = Array(repeating: UInt8(ascii: "x"), count: 50_000)
        let display = DisplayEvent(rev: 1, viewPart: DisplayEvent.viewPart("contacts"), state: shared)
        let lineLength = display.count
        let head = lineLength - shared.count
        var logs = (0..<1000).map { _ in EventLog(maximumEvents: 256, maximumBytes: 1 << 20, budget: budget) }
        for index in logs.indices { logs[index].appendDisplay(display) }
        #expect(budget.bytes == shared.count + 1000 * (head + EventLog.overhead))
        #expect(!budget.isOver)
        // Each log still counts the whole line against its own bound.
        #expect(logs[0].bytes == lineLength + EventLog.overhead)
        // Equal bytes in another array are another copy: counted again.
        var other = EventLog(maximumEvents: 256, maximumBytes: 1 << 20, budget: budget)
        other.appendDisplay(DisplayEvent(rev: 1, viewPart: display.viewPart, state: shared.map { $0 }))
        #expect(budget.bytes == 2 * shared.count + 1001 * (head + EventLog.overhead))
        // The bytes stop counting when the last log lets go of them.
        for index in logs.indices.dropLast() { logs[index].removeAll() }
        #expect(budget.bytes == 2 * shared.count + 2 * (head + EventLog.overhead))
        logs[logs.count - 1].append(line(2, bytes: 10), rev: 2)
        logs[logs.count - 1].removeAll()
        other.removeAll()
        #expect(budget.bytes == 0)
    }

    @Test func aDisplayKeptAsItsStateEncodingReplaysTheLineThatWasSent() {
        var log = EventLog(maximumEvents: 256, maximumBytes: 64 * 1024)
        let state = Array(#"{"query":"pizza","loading":false}"#.utf8)
        let sent = ServerMessage.displayLine(rev: 1, view: "search", encodedState: state)
        log.appendDisplay(DisplayEvent(rev: 1, viewPart: DisplayEvent.viewPart("search"), state: state))
        log.append(line(2, bytes: 10), rev: 2)
        #expect(log.lines(after: 0, current: 2) == [sent, line(2, bytes: 10)])
        #expect(log.bytes == sent.count + line(2, bytes: 10).count + 2 * EventLog.overhead, "counted as the whole line")
    }

    @Test func aDisplayWrittenFromItsPartsIsTheLineTheProtocolDefines() {
        let state = Array(#"{"query":"caf\u00e9 \"x\"","loading":true}"#.utf8)
        for rev in [0, 1, 9, 10, 99, 12_345, Int.max] {
            for view in ["search", "a \"quoted\" view"] {
                let display = DisplayEvent(rev: rev, viewPart: DisplayEvent.viewPart(view), state: state)
                let expected = ServerMessage.displayLine(rev: rev, view: view, encodedState: state)
                #expect(display.line == expected)
                #expect(display.count == expected.count)
            }
        }
    }
}
