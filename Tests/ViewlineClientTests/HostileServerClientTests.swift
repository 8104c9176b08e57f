import Foundation
import Testing
import ViewlineClient

#if canImport(Glibc)
    import Glibc
#endif

/// The Swift client against a malicious fake server: it takes no line longer than its
/// limit (the connection closes instead of buffering it), and no JSON number traps it.
@Suite struct HostileServerClientTests {
    /// A one-connection server on a loopback port: says `welcome`, waits for the
    /// client's first command (so the test has subscribed by then), then sends
    /// `then`'s bytes.
    final class FakeServer: @unchecked Sendable {
        let port: Int
        private let listener: Int32
        init(then bytes: [UInt8]) throws {
            let (listener, port) = loopbackListener(backlog: 4)
            self.listener = listener
            self.port = port
            Thread {
                let client = accept(listener, nil, nil)
                guard client >= 0 else { return }
                let welcome =
                    Array(
                        #"{"type":"welcome","protocol":1,"minor":3,"session":"s1","token":"0123456789abcdef0123456789abcdef0123456789abcdef","server":"fake"}"#
                            .utf8) + [10]
                _ = welcome.withUnsafeBytes { send(client, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
                var first: UInt8 = 0
                guard recv(client, &first, 1, 0) == 1 else {
                    close(client)
                    return
                }
                var all = bytes
                var sent = 0
                while sent < all.count {
                    let n = all.withUnsafeMutableBytes { send(client, $0.baseAddress! + sent, $0.count - sent, Int32(MSG_NOSIGNAL)) }
                    if n <= 0 { break }
                    sent += n
                }
                var byte: UInt8 = 0
                while recv(client, &byte, 1, 0) > 0 {}  // until the client hangs up
                close(client)
            }.start()
        }
        deinit { close(listener) }
    }

    func options() -> ViewlineClient.Options {
        var options = ViewlineClient.Options(timeout: .seconds(3), reconnect: false)
        options.maximumLineBytes = 64 * 1024
        options.pingInterval = nil
        return options
    }

    @Test func aLineLongerThanTheClientTakesClosesTheConnection() async throws {
        // 8 MiB and no newline: the client stops at its 64 KiB.
        let server = try FakeServer(then: [UInt8](repeating: UInt8(ascii: "x"), count: 8 << 20))
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port), options: options())
        await #expect(throws: (any Error).self) { try await client.send("ping") }
        await client.close()
    }

    @Test func hostileNumbersAreReadWithoutATrap() async throws {
        let lines = [
            #"{"type":"display","rev":1e300,"view":"search","state":{"rating":1e300,"n":-9223372036854775809}}"#,
            #"{"type":"display","rev":-9223372036854775808,"view":"search","state":{"n":18446744073709551616}}"#,
            #"{"type":"alert","rev":1e19,"id":1e19,"title":"t","message":"m","actions":[]}"#,
            #"{"type":"display","rev":2,"view":"done","state":{}}"#,
        ]
        let server = try FakeServer(then: Array(lines.joined(separator: "\n").utf8) + [10])
        let client = try await ViewlineClient.connect(to: .tcp(port: server.port), options: options())
        let events = await client.events()
        let go = Task { try? await client.send("go") }  // its reply never comes: the events do
        for await event in events {
            if case .display(let view, _, _) = event, view == "done" { break }
        }
        go.cancel()
        await client.close()
    }
}
