import Foundation
import Synchronization

/// What `attach` keeps between attempts: failures per address, every address's
/// rate of attaches, the cluster lookups each address has in flight and the lookups
/// that found nothing a moment ago.
final class AttachPolicy: Sendable {
    /// Failed `attach`es per address: tokens nobody here made (5 free), and tokens
    /// this cluster made that lead nowhere (a session that ended: 100 free, so clients
    /// following their sessions through a failover are not taken for guessers, while
    /// an address replaying its own dead tokens is still slowed).
    let throttle = FailureThrottle()
    /// Attaches per address, successful or not (``AttachRate``).
    let rate: AttachRate

    init(attachesPerSecond: Int) {
        rate = AttachRate(perSecond: Double(attachesPerSecond))
    }
    /// Cluster lookups of `attach` in flight per address (at most ``lookupsPerAddress``).
    let lookupsInFlight = Mutex<[String: Int]>([:])
    static let lookupsPerAddress = 8
    /// Tokens (by address and a digest of the whole token) whose lookup found no
    /// session in the last ``missRemembered``: the same address asking again is answered
    /// `bad_token` without a query. Keyed by the whole token and the address, so a
    /// revoked token never stands in for the session's new one, and nobody else's
    /// lookups are answered from it. At most ``missesKept``.
    let recentMisses = Mutex<[String: ContinuousClock.Instant]>([:])
    static let missRemembered = Duration.seconds(2)
    static let missesKept = 4096

    /// Whether `lookup` found nothing a moment ago.
    func missedRecently(_ lookup: String, now: ContinuousClock.Instant) -> Bool {
        recentMisses.withLock { misses in
            guard let at = misses[lookup] else { return false }
            if now - at < Self.missRemembered { return true }
            misses[lookup] = nil
            return false
        }
    }

    /// `lookup` found nothing now.
    func missed(_ lookup: String, now: ContinuousClock.Instant) {
        recentMisses.withLock { misses in
            if misses.count >= Self.missesKept {
                misses = misses.filter { now - $0.value < Self.missRemembered }
                if misses.count >= Self.missesKept { misses.removeAll(keepingCapacity: true) }
            }
            misses[lookup] = now
        }
    }
}

/// Attaches per address, by a token bucket on the monotonic clock: `perSecond` a
/// second with bursts of twice as many (``SessionLimits/attachesPerSecondPerAddress``);
/// past it, `attach_throttled` (try again in 1 s). Each attach makes the server send a
/// snapshot (and, in a cluster, may query the database), so this bounds what one
/// address can make the server do by attaching. At most ``addressesKept`` addresses
/// are remembered (full buckets go first).
final class AttachRate: Sendable {
    let perSecond: Double
    let burst: Double
    static let addressesKept = 10_000
    private let buckets = Mutex<[String: (tokens: Double, at: ContinuousClock.Instant)]>([:])

    /// `perSecond` attaches a second per address (0: no cap).
    init(perSecond: Double) {
        self.perSecond = perSecond
        burst = 2 * perSecond
    }

    /// Takes one attach for `address`; `false` when its bucket is empty.
    func admit(_ address: String, now: ContinuousClock.Instant = .now) -> Bool {
        guard perSecond > 0 else { return true }
        return buckets.withLock { buckets in
            var bucket = buckets[address] ?? (burst, now)
            let elapsed = now - bucket.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            bucket.tokens = min(burst, bucket.tokens + max(0, seconds) * perSecond)
            bucket.at = now
            guard bucket.tokens >= 1 else {
                buckets[address] = bucket
                return false
            }
            bucket.tokens -= 1
            if buckets[address] == nil, buckets.count >= Self.addressesKept {
                // Forget the addresses whose buckets have filled up again.
                buckets = buckets.filter { entry in
                    entry.value.tokens + Double((now - entry.value.at).components.seconds) * perSecond < burst
                }
                if buckets.count >= Self.addressesKept { buckets.removeAll(keepingCapacity: true) }
            }
            buckets[address] = bucket
            return true
        }
    }
}

/// `attach`, the session policy of moving a connection between sessions: where it is
/// declared (a built-in command of every application), not in the transport, which
/// only hands over the connection's link.
extension Application {
    /// `attach <token> [last-rev]`: moves this connection to the session that owns
    /// the token. Returns that session, or `nil` (after an error reply, the
    /// connection still on `current`) when the token is not a live session's, the
    /// address is throttled or the node is full.
    ///
    /// The connection's own session (given at `welcome`, while it still has it) ends
    /// when the connection leaves it with no other (nobody else knows it). Any other
    /// session it leaves lives on, detached, until it expires.
    func attach(_ request: Request, from current: Session, origin: CommandOrigin) async -> Session? {
        let number = origin.connection
        guard let client = origin.client else {
            await current.reject(
                re: request.id, ProtocolError(.badToken, "attach needs a network connection to the server"), to: number, command: "attach")
            return nil
        }
        let (link, own, peer) = (client.link, client.ownSession, client.peer)
        let keys = FailureThrottle.key("attach", peer: peer)
        let madeKeys = FailureThrottle.key("attach-made", peer: peer, allowance: 20)
        if let seconds = attachPolicy.throttle.wait(for: keys + madeKeys, now: FailureThrottle.monotonicNow()) {
            logger.debug("attach throttled: too many failed attaches from this address", metadata: ["peer": "\(peer ?? "?")", "wait": "\(seconds)"])
            await current.reject(
                re: request.id, ProtocolError(.attachThrottled, "too many failed attach attempts; try again in \(seconds) s", retryAfter: seconds),
                to: number, command: "attach")
            return nil
        }
        guard attachPolicy.rate.admit(peer ?? "local") else {
            logger.debug("attach throttled: too many attaches from this address", metadata: ["peer": "\(peer ?? "?")"])
            await current.reject(
                re: request.id, ProtocolError(.attachThrottled, "too many attaches from this address; try again in 1 s", retryAfter: 1),
                to: number, command: "attach")
            return nil
        }
        let token = request.arguments[BuiltInArgument.token]
        let badToken = ProtocolError(.badToken, "no session has that token (it may have expired)")
        guard Session.isWellFormedToken(token) else {
            // Not a token this server makes: no lookup (a NUL byte or a quote never reaches
            // the database), and a guess like any other.
            attachPolicy.throttle.failed(keys, now: FailureThrottle.monotonicNow())
            await current.reject(re: request.id, badToken, to: number, command: "attach")
            return nil
        }
        var found = sessions.session(for: token)
        let miss = (peer ?? "local") + " " + Hex.string(Cluster.digest(Array(token.utf8)).prefix(16))
        if found == nil, cluster != nil, attachPolicy.missedRecently(miss, now: .now) {
            // Looked up a moment ago and found nowhere: no second query.
            attachPolicy.throttle.failed(madeKeys, now: FailureThrottle.monotonicNow())
            await current.reject(re: request.id, badToken, to: number, command: "attach")
            return nil
        }
        if found == nil, let cluster {
            // A database lookup is what a guess costs the cluster. An address has at
            // most a few in flight at once (so a burst of guesses cannot all reach the
            // database before the first ones fail), and only a lookup that finds
            // nothing counts as a failure: clients behind one address (a NAT, a proxy)
            // following their sessions through a failover all at once are never
            // taken for a guesser.
            let address = peer ?? "local"
            let admitted = attachPolicy.lookupsInFlight.withLock { inFlight -> Bool in
                guard inFlight[address, default: 0] < AttachPolicy.lookupsPerAddress else { return false }
                inFlight[address, default: 0] += 1
                return true
            }
            guard admitted else {
                logger.debug("attach throttled: too many lookups from this address in flight", metadata: ["peer": "\(peer ?? "?")"])
                await current.reject(
                    re: request.id,
                    ProtocolError(
                        .attachThrottled, "too many attaches from this address are being looked up; try again in 1 s", retryAfter: 1), to: number,
                    command: "attach")
                return nil
            }
            defer {
                attachPolicy.lookupsInFlight.withLock { inFlight in
                    inFlight[address, default: 1] -= 1
                    if inFlight[address] == 0 { inFlight[address] = nil }
                }
            }
            do {
                switch try await cluster.locate(token, application: self) {
                case .unknown: break
                case .moved(let address, let web):
                    var moved = ProtocolError(.moved, "the session lives on \(address); attach there", address: address)
                    if !web.isEmpty { moved.web = web }
                    await current.reject(re: request.id, moved, to: number, command: "attach")
                    return nil
                case .restored(let session):
                    found = session  // registered by the cluster
                }
            } catch let error as ProtocolError {  // the node (full, no lease), not the token: its own words
                await current.reject(re: request.id, error, to: number, command: "attach")
                return nil
            } catch {
                // The database failed: logged here, never named to the client, and not
                // counted as a failure. It says nothing about the token (every lookup
                // fails alike while the database is away, and the lookups in flight per
                // address stay bounded above), and counting it would lock out every
                // client behind one address that follows its session through a database
                // outage (chaos runs saw clients wait 90 s and more for the doubled waits).
                logger.error("attach: session lookup failed", metadata: ["peer": "\(peer ?? "?")", "error": "\(String(reflecting: error))"])
                await current.reject(
                    re: request.id,
                    ProtocolError(
                        .unavailable, "the session cannot be looked up right now; try again shortly", retryAfter: 1), to: number, command: "attach")
                return nil
            }
        }
        guard let target = found else {
            // A token a node of this cluster made (its tag says so) is a client coming
            // back to a session that is gone (quit, expired, lost with its node before
            // its first record), not a guess: not counted, so clients behind one
            // address that follow their sessions through a failover are not throttled
            // for the ones it lost. Only a token nobody here made counts.
            let made = tokens.tagged(token)
            logger.debug(
                "attach: no such session",
                metadata: [
                    "record": "\(SessionRegistry.split(token).lookup)", "peer": "\(peer ?? "?")", "made-here": "\(made)",
                ])
            let now = FailureThrottle.monotonicNow()
            if made {
                if cluster != nil { attachPolicy.missed(miss, now: .now) }
                attachPolicy.throttle.failed(madeKeys, now: now)
            } else {
                attachPolicy.throttle.failed(keys, now: now)
            }
            await current.reject(re: request.id, badToken, to: number, command: "attach")
            return nil
        }
        // A success clears nothing: attaching to one's own session must not buy
        // more guesses at others' (failures are forgotten after a quiet while).
        let lastRev = request.arguments[BuiltInArgument.lastRev]
        if target === current {
            // Told `bye` meanwhile: its attach ends there, unanswered (PROTOCOL §4).
            guard let left = await current.leave(number) else { return nil }
            do {
                if try await target.attach(link, as: number, lastRev: lastRev, re: request.id, token: token) { return target }
            } catch {
                await goBack(to: current, link, as: number, left: left, re: request.id, error)
                return nil
            }
            // Ended meanwhile: its connections were told `bye`; this one goes too.
            if await target.isClosed { return nil }
            // Its token changed (`end-others`) while this connection was between leaving
            // and joining it: it was one of the others, and goes as they did.
            link.send(.reply(re: request.id, result: .failure(badToken)))
            link.send(.bye(.revoked))
            link.close()
            return nil
        }
        // A session at its cap of connections is refused before this one leaves its
        // own (a hop out and back would let newcomers take the place it left).
        if await target.isFull {
            await current.reject(re: request.id, Session.full(await target.connectionCount), to: number, command: "attach")
            return nil
        }
        // Counted as attached before it is joined, so it cannot expire in between.
        // The connection leaves `current` before it joins `target`: nothing of the old
        // session follows the attach's reply (an old `display` after the snapshot).
        // If the join fails, it goes back to `current`, which answers the error.
        sessions.attached(target)
        guard let left = await current.leave(number) else {
            // Told `bye` meanwhile (its session ended, or `end-others` revoked it): it
            // joins nothing, and nothing more is sent to it (PROTOCOL §4).
            sessions.detached(target)
            return nil
        }
        let joined: Bool
        do {
            joined = try await target.attach(link, as: number, lastRev: lastRev, re: request.id, token: token)
        } catch {
            sessions.detached(target)
            await goBack(to: current, link, as: number, left: left, re: request.id, error)
            return nil
        }
        guard joined else {
            // It ended (quit, eviction, expiry), or `end-others` changed its token, between
            // the lookup and the join.
            logger.debug("attach: the session ended before it could be joined", metadata: ["record": "\(SessionRegistry.split(token).lookup)"])
            sessions.detached(target)
            await goBack(to: current, link, as: number, left: left, re: request.id, badToken)
            return nil
        }
        sessions.detached(current)
        if current === own, await current.connectionCount == 0 {
            // The connection's own session goes: nobody else uses it.
            sessions.remove(current)
            await current.close()
        }
        return target
    }

    /// A failed attach: the connection goes back to the session it left, which answers
    /// the error, unless that session's `end-others` ran while the connection was
    /// away. Then it was one of the others: it is answered and revoked as they were.
    private func goBack(
        to current: Session, _ link: SessionConnection, as number: Int, left: String, re: JSON, _ error: ProtocolError
    ) async {
        if await current.rejoin(link, as: number, left: left) {
            await current.reject(re: re, error, to: number, command: "attach")
            return
        }
        link.send(.reply(re: re, result: .failure(error)))
        // Its token changed meanwhile (`end-others`: it was one of the others), or others
        // took the place it left (the cap of connections): it goes, told which.
        link.send(.bye(await current.isFull ? Bye(.refused, "the session has all the connections it may") : .revoked))
        link.close()
    }
}
