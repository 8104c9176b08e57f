import Foundation
import Testing
@testable import ViewlineKit

/// The registry bounds sessions per address and in all: a full registry makes room
/// with the newcomer's own address's oldest detached session first, so one address
/// churning connections cannot evict everybody else; expiry takes the oldest.
@Suite struct SessionRegistryTests {
    func application(maximumSessions: Int, perAddress: Int = 0, ttl: Duration = .seconds(300)) -> Application {
        var limits = SessionLimits()
        limits.maximumSessions = maximumSessions
        limits.maximumSessionsPerAddress = perAddress
        limits.timeToLive = ttl
        var configuration = ServerConfiguration()
        configuration.sessions = limits
        return Application([Counter.self], configuration: configuration)
    }

    /// A session from `peer`, registered, attached and (unless `keep`) detached again.
    @discardableResult
    func open(_ app: Application, from peer: String, keep: Bool = false) throws -> (session: Session, evicted: Session?) {
        let session = Session(id: "s", application: app, peer: peer)
        let evicted = try app.sessions.register(session).get()
        app.sessions.attached(session)
        if !keep { app.sessions.detached(session) }
        return (session, evicted)
    }

    @Test func aFullRegistryEvictsFromTheAddressHoldingTheMostFirst() throws {
        let app = application(maximumSessions: 40)
        let victim = try open(app, from: "10.0.0.1").session  // detached, the oldest of all
        let attackerFirst = try open(app, from: "10.0.0.9").session
        for _ in 0..<38 { try open(app, from: "10.0.0.9") }
        // Full: the attacker's next session evicts its own oldest, not the victim's.
        #expect(try open(app, from: "10.0.0.9").evicted === attackerFirst)
        for _ in 0..<100 { try open(app, from: "10.0.0.9") }
        #expect(app.sessions.session(for: victim.token) === victim)
        // A newcomer from an address with nothing detached takes from the address
        // that holds the most (the attacker), not the oldest of all (the victim).
        let other = try open(app, from: "10.0.0.2", keep: true)
        #expect(other.evicted?.peer == "10.0.0.9")
        #expect(app.sessions.session(for: victim.token) === victim)
    }

    /// An attacker holding one attached session from each of many addresses leaves
    /// nothing beyond the floor to end: newcomers from fresh addresses are refused, and
    /// the victim coming back (its address holds a detached session) still gets a
    /// session past the cap to attach with — its detached one is never ended for anyone.
    @Test func aFloodFromManyAddressesNeverEndsAFewDetachedSessions() throws {
        let app = application(maximumSessions: 200)
        let victim = try open(app, from: "10.0.0.1").session
        for index in 0..<199 { try open(app, from: "10.1.\(index / 250).\(index % 250)", keep: true) }
        for index in 0..<100 {
            guard case .failure(.full) = app.sessions.register(Session(id: "n", application: app, peer: "10.2.0.\(index)")) else {
                Issue.record("a newcomer from a fresh address is refused when nothing can make room")
                return
            }
        }
        #expect(app.sessions.session(for: victim.token) === victim)
        let back = app.sessions.register(Session(id: "v", application: app, peer: "10.0.0.1"))
        guard case .success(nil) = back else {
            Issue.record("the victim coming back gets a session past the cap, ending none: \(back)")
            return
        }
        #expect(app.sessions.session(for: victim.token) === victim)
    }

    @Test func anAddressAtItsCapMakesRoomFromItsOwnSessionsOrIsRefused() throws {
        let app = application(maximumSessions: 100, perAddress: 2)
        let first = try open(app, from: "10.0.0.9").session
        try open(app, from: "10.0.0.9", keep: true)
        #expect(try open(app, from: "10.0.0.9", keep: true).evicted === first)
        // Both of its sessions have a connection: the next one is refused.
        let refused = app.sessions.register(Session(id: "s", application: app, peer: "10.0.0.9"))
        guard case .failure(.addressFull) = refused else {
            Issue.record("expected the address to be full, got \(refused)")
            return
        }
        #expect(try open(app, from: "10.0.0.1").evicted == nil)  // others are not limited by it
    }

    @Test func everySessionDetachedLongerThanTheTimeToLiveExpiresOldestFirst() async throws {
        let app = application(maximumSessions: 100, ttl: .seconds(60))
        let old = try open(app, from: "10.0.0.1").session
        let kept = try open(app, from: "10.0.0.1", keep: true).session
        await app.sessions.expireDue(now: .now + .seconds(30))
        #expect(await !old.isClosed, "not yet")
        await app.sessions.expireDue(now: .now + .seconds(61))
        #expect(await old.isClosed)
        #expect(await !kept.isClosed && app.sessions.session(for: kept.token) === kept)
        #expect(app.sessions.counts == (1, 1))
    }

    @Test func attachingAgainTakesASessionOffTheExpiryList() async throws {
        let app = application(maximumSessions: 100, ttl: .seconds(60))
        let session = try open(app, from: "10.0.0.1").session
        app.sessions.attached(session)
        await app.sessions.expireDue(now: .now + .seconds(120))
        #expect(await !session.isClosed)
        app.sessions.detached(session)
        await app.sessions.expireDue(now: .now + .seconds(120))
        #expect(await session.isClosed)
        #expect(app.sessions.counts == (0, 0))
    }
}
