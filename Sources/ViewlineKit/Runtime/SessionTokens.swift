import CSHA256

/// Makes session tokens and recognises the ones made under its key.
///
/// A token is 48 lowercase hex digits: a 16-digit lookup part (64 random bits: the
/// session's key in the registry and in a cluster's records) and a 32-digit secret
/// part, 96 random bits then a 32-bit tag — the first bytes of HMAC-SHA-256 of the
/// 40 digits before it under the key. Every node of a cluster has the same key (it
/// is kept in the cluster's database), so any node can tell a token one of them made
/// from a guess: an `attach` with a made token whose session is gone is a client
/// coming back too late (its session quit, expired, or was lost with its node before
/// its first record), not a guess, and is not counted against its address. Clients
/// behind one address (a NAT) following their sessions through a failover are then
/// not throttled for the sessions the failover lost.
///
/// The tag says nothing about whether a session exists and opens none: the whole
/// token is still compared with the session's. A token made before the key existed
/// (another version, another cluster) has a wrong tag and is looked up as before.
struct SessionTokens: Sendable {
    /// The key tags are made under (32 bytes).
    let key: [UInt8]

    static let keyLength = 32
    static let tagDigits = 8

    /// Tokens tagged under `key`; a fresh random key when `nil` (a node alone:
    /// nobody else needs to recognise its tokens).
    init(key: [UInt8]? = nil) {
        self.key = key ?? Self.randomKey()
    }

    /// 32 random bytes from the system generator: a key for a new cluster.
    static func randomKey() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<keyLength).map { _ in generator.next() as UInt8 }
    }

    /// A new token: fresh lookup and secret parts.
    func make() -> String {
        make(lookup: Hex.random(bytes: SessionRegistry.lookupLength / 2))
    }

    /// A new secret part for `token`, its lookup part kept (`end-others`: the
    /// session stays where it is recorded, a link anyone else holds no longer joins it).
    func make(keepingLookupOf token: String) -> String {
        make(lookup: String(token.prefix(SessionRegistry.lookupLength)))
    }

    /// Whether `token` carries the tag this key gives it: made by a node with this
    /// key. Compared in constant time.
    func tagged(_ token: String) -> Bool {
        guard Session.isWellFormedToken(token) else { return false }
        let utf8 = Array(token.utf8)
        let body = utf8.prefix(utf8.count - Self.tagDigits)
        return SessionRegistry.constantTimeEqual(Array(utf8.suffix(Self.tagDigits)), tag(of: Array(body)))
    }

    private func make(lookup: String) -> String {
        let body = lookup + Hex.random(bytes: (48 - SessionRegistry.lookupLength - Self.tagDigits) / 2)
        return body + String(decoding: tag(of: Array(body.utf8)), as: UTF8.self)
    }

    /// The tag of a token's first 40 digits, as 8 hex digits.
    private func tag(of body: [UInt8]) -> [UInt8] {
        var mac = [UInt8](repeating: 0, count: 32)
        let ok = key.withUnsafeBufferPointer { key in
            body.withUnsafeBufferPointer { body in
                viewline_hmac_sha256(key.baseAddress, key.count, body.baseAddress, body.count, &mac)
            }
        }
        precondition(ok == 1, "HMAC-SHA-256 from libcrypto failed")
        return Hex.utf8(mac.prefix(Self.tagDigits / 2))
    }
}
