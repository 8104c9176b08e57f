import NIOCore
import Testing
import ViewlineProtocol
@testable import ViewlineKit

/// A reply written from an encoded result is, byte for byte, the line the protocol's
/// own encoder makes of the same reply: whatever its id, and whether its result is a
/// constant or parts.
@Suite struct EncodedResultTests {
    static let results: [EncodedResult] = [
        EncodedResult(constant: #"{"pong":true}"#),
        EncodedResult([Array(#"{"name":"#.utf8), Array(#""Harbor \"Crust\"""#.utf8), Array("}".utf8)]),
    ]
    static let ids: [JSON] = [.null, .int(7), .string("a\"b\\c"), ["nested": [1, 2]]]

    @Test(arguments: results, ids)
    func aReplyIsTheProtocolsOwnLine(result: EncodedResult, re: JSON) {
        let expected = ServerMessage.reply(re: re, result: .success(result.json)).line
        var buffer = ByteBufferAllocator().buffer(capacity: 0)
        result.writeReply(re: re, into: &buffer)
        var written: [UInt8] = []
        result.writeReply(re: re) { written.append(contentsOf: $0) }
        #expect(Array(buffer.readableBytesView) == expected)
        #expect(Array(buffer.readableBytesView) == written)
        #expect(written.last == 0x0A)
    }

    @Test func theHeadOfAReplyToNullIsTheHeadNullAndTheMiddle() {
        #expect(Array(ReplyParts.bytes(ReplyParts.nullHead)) == ServerMessage.replyHead + Array("null".utf8) + ServerMessage.successfulReplyMiddle)
    }
}
