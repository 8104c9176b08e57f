import Foundation
import Testing
import ViewlineProtocol
import ViewlineTestSupport

/// Every command's every argument at its extremes, inline and as JSON, from a logged-in
/// admin session (the widest set of commands): each line gets exactly one reply, never
/// a crash, and the server goes on answering (PROTOCOL §8: integer arguments are
/// checked against their declared bounds before any handler runs).
@Suite(.blocksItsThread) struct ArgumentExtremesTests {
    /// Values at and beyond every bound a handler could do arithmetic with.
    static let extremes: [String] = [
        "0", "1", "-1", "5", "6", "128", "129", "3600000", "3600001",
        "9007199254740991", "9007199254740992", "461168601842738792",
        "9223372036854775807", "-9223372036854775808", "9223372036854775808",
        "1e300", "-1e300", "1.5", "\"x\"", "null", "true", "[]", "{}",
    ]

    @Test func everyArgumentAtItsExtremesGetsOneReplyAndTheServerStaysUp() throws {
        let server = try startServer()
        let client = try connect(server)
        #expect(try client.command("login alice wonderland").isOK)
        #expect(try client.command("draft extremes").isOK)
        let help = try client.command("help")
        let commands = try #require(help["result"]?["commands"]?.arrayValue)
        var sent = 0
        for command in commands {
            let name = try #require(command["name"]?.stringValue)
            // quit ends the connection (its own tests bound it); wait's hour-long
            // timeout, the largest it takes, would hold this one for that hour.
            guard name != "quit" else { continue }
            let arguments = command["args"]?.arrayValue?.compactMap(\.stringValue) ?? []
            for argument in arguments {
                for value in Self.extremes where !(name == "wait" && value == "3600000") {
                    let line = #"{"id":\#(sent),"cmd":"\#(name)","args":{"\#(argument)":\#(value)}}"#
                    let reply = try client.command(line)
                    #expect(reply["re"] == .int(sent), "\(line) → \(reply)")
                    sent += 1
                }
            }
            for value in Self.extremes where !value.contains("\"") && !(name == "wait" && value == "3600000") {
                let reply = try client.command("\(name) \(value)")
                #expect(reply.type == "reply", "\(name) \(value) → \(reply)")
                sent += 1
            }
            // Answered alerts (confirm, cancel) and armed faults leave state behind; a
            // ping after each command shows the server is still there.
            #expect(try client.command("ping")["result"]?["pong"] == true, "after \(name)")
            if name == "logout" { #expect(try client.command("login alice wonderland").isOK) }
        }
        #expect(sent > 300)
        #expect(server.process.isRunning)
    }

    @Test func savedPagesAreBoundedByWhatExists() throws {
        let server = try startServer()
        let client = try connect(server)
        #expect(try client.command("login alice wonderland").isOK)
        // The line that crashed the server (an overflow computing the page's offset).
        #expect(try client.command("saved 461168601842738792").errorCode == "bad_arguments")
        #expect(try client.command(#"{"cmd":"saved","args":{"page":9223372036854775807}}"#).errorCode == "bad_arguments")
        let first = try client.command("saved")
        #expect(first["result"]?["page"] == 1)
        #expect(first["result"]?["pages"] == 1)
        let beyond = try client.command("saved 2")
        #expect(beyond.errorCode == "bad_arguments")
        #expect(beyond["error"]?["message"]?.stringValue?.contains("page must be 1 to 1") == true)
        #expect(try client.command("ping").isOK)
    }
}
