import Testing
@testable import ViewlineKit

/// A token carries a tag of its key: any node with the key tells a token one of them
/// made from a guess, and the tag is lost by any change to the token.
@Suite struct SessionTokensTests {
    @Test func aMadeTokenIsWellFormedAndTaggedUnderItsKeyOnly() {
        let tokens = SessionTokens()
        let token = tokens.make()
        #expect(Session.isWellFormedToken(token))
        #expect(tokens.tagged(token))
        #expect(SessionTokens(key: tokens.key).tagged(token))  // another node of the cluster
        #expect(!SessionTokens().tagged(token))  // another cluster
        #expect(tokens.make() != token)
    }

    @Test func changingAnyDigitLosesTheTag() {
        let tokens = SessionTokens()
        let token = Array(tokens.make().utf8)
        for index in token.indices {
            var changed = token
            changed[index] = changed[index] == UInt8(ascii: "0") ? UInt8(ascii: "1") : UInt8(ascii: "0")
            #expect(!tokens.tagged(String(decoding: changed, as: UTF8.self)), "digit \(index)")
        }
    }

    @Test func aGuessIsNotTagged() {
        let tokens = SessionTokens()
        // A guesser's tokens: well-formed, random, and (but for one in 2³²) untagged.
        let guesses = (0..<1_000).map { _ in Session.makeSecret() }
        #expect(guesses.allSatisfy(Session.isWellFormedToken))
        #expect(guesses.filter(tokens.tagged).isEmpty)
        #expect(!tokens.tagged("not a token"))
    }

    @Test func aNewSecretKeepsTheLookupPartAndIsTaggedToo() {
        let tokens = SessionTokens()
        let token = tokens.make()
        let renewed = tokens.make(keepingLookupOf: token)
        #expect(renewed.prefix(16) == token.prefix(16))
        #expect(renewed.dropFirst(16) != token.dropFirst(16))
        #expect(tokens.tagged(renewed))
    }
}
