/// Every line the server sends. Each encodes to one JSON object whose first key is `type`.
public enum ServerMessage: Sendable, Equatable {
    /// The first line of a connection: its session, the token that attaches to it
    /// again, the server's name, and the longest line it takes from a client (`nil`:
    /// not said; servers before 1.3 do not).
    case welcome(session: String, token: String, server: String, maximumLineBytes: Int? = nil)
    /// The answer to one command (`re` is its id): a result or an error.
    case reply(re: JSON, result: Result<JSON, ProtocolError>)
    /// A view's new state, numbered `rev` in the session's event order.
    case display(rev: Int, view: String, state: JSON)
    /// A modal alert, presented until answered or dismissed.
    case alert(rev: Int, id: String, content: AlertContent)
    /// The alert `id` went away (answered elsewhere, or moot).
    case dismiss(rev: Int, id: String)
    /// The last line of a connection, and why (``Bye/Code``).
    case bye(Bye)

    /// The protocol's major version, in `welcome`: additions keep it, changes that
    /// break a client raise it.
    public static let protocolVersion = 1
    /// The protocol's minor version, in `welcome.minor` (from 1.3): which additions
    /// within ``protocolVersion`` the server has (PROTOCOL §9), so a client need not
    /// read them from `server`.
    public static let protocolMinorVersion = 3

    /// The line's JSON object, `type` first.
    public var json: JSON {
        switch self {
        case .welcome(let session, let token, let server, let maximumLineBytes):
            var object: JSONObject = [
                "type": "welcome", "protocol": .int(Self.protocolVersion), "minor": .int(Self.protocolMinorVersion),
                "session": .string(session),
                "token": .string(token), "server": .string(server),
            ]
            if let maximumLineBytes { object["maxLineBytes"] = .int(maximumLineBytes) }
            return .object(object)
        case .reply(let re, .success(let result)):
            return ["type": "reply", "re": re, "ok": true, "result": result]
        case .reply(let re, .failure(let error)):
            return ["type": "reply", "re": re, "ok": false, "error": error.json]
        case .display(let rev, let view, let state):
            return ["type": "display", "rev": .int(rev), "view": .string(view), "state": state]
        case .alert(let rev, let id, let content):
            var object: JSONObject = [
                "type": "alert", "rev": .int(rev), "id": .string(id), "title": .string(content.title),
                "message": .string(content.message), "actions": .array(content.actions.map(\.json)),
            ]
            if !content.fields.isEmpty { object["fields"] = .array(content.fields.map(\.json)) }
            return .object(object)
        case .dismiss(let rev, let id):
            return ["type": "dismiss", "rev": .int(rev), "id": .string(id)]
        case .bye(let bye):
            return ["type": "bye", "reason": .string(bye.reason), "code": .string(bye.code.rawValue)]
        }
    }

    /// The wire form: compact JSON and a trailing newline.
    public var line: [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(160)
        write(into: &out)
        out.append(0x0A)
        return out
    }

    /// Writes ``json``'s encoding; replies and displays, the lines sent most, are
    /// written straight from their parts, without building the object first.
    public func write(into out: inout [UInt8]) {
        switch self {
        case .reply(let re, .success(let result)):
            out.append(contentsOf: Self.replyHead)
            re.write(into: &out)
            out.append(contentsOf: Self.successfulReplyMiddle)
            result.write(into: &out)
            out.append(UInt8(ascii: "}"))
        case .display(let rev, let view, let state):
            Self.writeDisplayHead(rev: rev, view: view, into: &out)
            state.write(into: &out)
            out.append(UInt8(ascii: "}"))
        default:
            json.write(into: &out)
        }
    }

    /// The line of `.display(rev:view:state:)` from the state's encoding, already
    /// made: one encoding serves every session that shows an equal state.
    public static func displayLine(rev: Int, view: String, encodedState: [UInt8]) -> [UInt8] {
        var out: [UInt8] = []
        out.reserveCapacity(encodedState.count + view.utf8.count + 40)
        writeDisplayHead(rev: rev, view: view, into: &out)
        out.append(contentsOf: encodedState)
        out.append(contentsOf: [UInt8(ascii: "}"), 0x0A])
        return out
    }

    /// How every reply's line begins, up to its `re`: `{"type":"reply","re":`. With
    /// ``successfulReplyMiddle`` and ``replyTail``, what a writer needs to put a
    /// successful reply whose result is already encoded straight into its own buffer.
    public static let replyHead = Array(ReplyParts.bytes(ReplyParts.head))
    /// Between a successful reply's `re` and its result: `,"ok":true,"result":`.
    public static let successfulReplyMiddle = Array(ReplyParts.bytes(ReplyParts.successfulMiddle))
    /// How a reply's line ends: `}` and the newline.
    public static let replyTail = Array(ReplyParts.bytes(ReplyParts.tail))

    private static func writeDisplayHead(rev: Int, view: String, into out: inout [UInt8]) {
        out.append(contentsOf: #"{"type":"display","rev":"#.utf8)
        JSON.int(rev).write(into: &out)
        out.append(contentsOf: #","view":"#.utf8)
        JSON.writeString(view, into: &out)
        out.append(contentsOf: #","state":"#.utf8)
    }

    /// The event's place in the session's order (displays, alerts, dismisses); `nil` for the others.
    public var rev: Int? {
        switch self {
        case .display(let rev, _, _), .alert(let rev, _, _), .dismiss(let rev, _): rev
        default: nil
        }
    }
}
