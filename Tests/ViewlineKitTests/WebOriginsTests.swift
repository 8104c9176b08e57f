import NIOCore
import NIOHTTP1
import Testing
@testable import ViewlineKit

/// Which pages may open the WebSocket: the listener itself (scheme, port, and the
/// address the connection came in on, or `localhost` over loopback), or a listed origin.
@Suite struct WebOriginsTests {
    let origins = WebOrigins(scheme: "http", allowed: ["https://app.example"], hostNames: ["app.test"])

    func allows(_ origin: String, on local: String, port: Int = 8080) throws -> Bool {
        var head = HTTPRequestHead(version: .http1_1, method: .GET, uri: "/ws")
        head.headers.add(name: "Origin", value: origin)
        return origins.allows(head, local: try SocketAddress(ipAddress: local, port: port))
    }

    @Test func theAddressTheConnectionCameInOnIsOwnAndNoOtherIs() throws {
        #expect(try allows("http://192.0.2.10:8080", on: "192.0.2.10"))
        #expect(try !allows("http://192.0.2.11:8080", on: "192.0.2.10"))
        #expect(try allows("http://127.0.0.1:8080", on: "::ffff:127.0.0.1"))
        #expect(try !allows("http://192.0.2.10:8081", on: "192.0.2.10"))
    }

    @Test func localhostIsOwnOnlyOverLoopback() throws {
        #expect(try allows("http://localhost:8080", on: "127.0.0.1"))
        #expect(try allows("http://localhost:8080", on: "::1"))
        // A visitor's own `localhost:8080` page is another site to a server it reaches
        // over the network on the same port.
        #expect(try !allows("http://localhost:8080", on: "192.0.2.10"))
        #expect(try !allows("http://localhost:8080", on: "2001:db8::10"))
    }

    @Test func listedOriginsAndHostNamesAreOwnAnywhere() throws {
        #expect(try allows("https://app.example", on: "192.0.2.10"))
        #expect(try allows("http://app.test:8080", on: "192.0.2.10"))
        #expect(try !allows("http://evil.test:8080", on: "127.0.0.1"))
    }
}
