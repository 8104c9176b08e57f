/// Reading a server's lines back: what a client (or a test that talks to a real
/// server) does with each line it receives.
extension ServerMessage {
    /// The message a server line holds (without its newline); `nil` for a line that
    /// is not JSON or not a message this protocol version defines. Keys a later
    /// server adds are ignored (PROTOCOL §9).
    public init?(line: some Collection<UInt8>) {
        var bytes = Array(line)
        if bytes.last == 0x0A { bytes.removeLast() }
        guard let json = try? JSON.parse(bytes) else { return nil }
        self.init(json: json)
    }

    /// The message a server line's JSON object holds; `nil` when it holds none.
    public init?(json: JSON) {
        switch json["type"]?.stringValue {
        case "welcome":
            guard let session = json["session"]?.stringValue, let token = json["token"]?.stringValue else { return nil }
            self = .welcome(
                session: session, token: token, server: json["server"]?.stringValue ?? "", maximumLineBytes: json["maxLineBytes"]?.intValue)
        case "reply":
            let re = json["re"] ?? .null
            switch json["ok"]?.boolValue {
            case true?:
                self = .reply(re: re, result: .success(json["result"] ?? .null))
            case false?:
                guard let error = json["error"].flatMap(ProtocolError.init(json:)) else { return nil }
                self = .reply(re: re, result: .failure(error))
            case nil:
                return nil
            }
        case "display":
            guard let rev = json["rev"]?.intValue, let view = json["view"]?.stringValue, let state = json["state"] else { return nil }
            self = .display(rev: rev, view: view, state: state)
        case "alert":
            guard let rev = json["rev"]?.intValue, let id = json["id"]?.stringValue, let content = AlertContent(json: json) else { return nil }
            self = .alert(rev: rev, id: id, content: content)
        case "dismiss":
            guard let rev = json["rev"]?.intValue, let id = json["id"]?.stringValue else { return nil }
            self = .dismiss(rev: rev, id: id)
        case "bye":
            let reason = json["reason"]?.stringValue ?? ""
            let code =
                json["code"]?.stringValue.map(Bye.Code.init(rawValue:))
                ?? (Bye.isFinal(code: nil, reason: reason) ? .ended : .shutdown)
            self = .bye(Bye(code, reason))
        default:
            return nil
        }
    }
}

extension ProtocolError {
    /// The error a reply's `error` object holds; `nil` without a `code` and a `message`.
    public init?(json: JSON) {
        guard let code = json["code"]?.stringValue, let message = json["message"]?.stringValue else { return nil }
        self.init(ErrorCode(rawValue: code), message, address: json["address"]?.stringValue, retryAfter: json["retryAfter"]?.intValue)
        web = json["web"]?.stringValue
    }
}

extension AlertContent {
    /// The alert an `alert` event (or a session record's alert) holds; `nil` unless it
    /// has one or two actions of known roles.
    public init?(json: JSON) {
        guard let actions = json["actions"]?.arrayValue?.compactMap(AlertAction.init(json:)), (1...2).contains(actions.count) else { return nil }
        let fields = json["fields"]?.arrayValue?.compactMap(AlertField.init(json:)) ?? []
        self.init(title: json["title"]?.stringValue ?? "", message: json["message"]?.stringValue ?? "", actions: actions, fields: fields)
    }
}

extension AlertAction {
    /// The action an alert's `actions` entry holds; `nil` for an unknown role.
    public init?(json: JSON) {
        guard let role = json["role"]?.stringValue.flatMap(Role.init(rawValue:)), let label = json["label"]?.stringValue else { return nil }
        self.init(role, label)
    }
}

extension AlertField {
    /// The field an alert's `fields` entry holds; `nil` without a `name`.
    public init?(json: JSON) {
        guard let name = json["name"]?.stringValue else { return nil }
        self.init(name: name, label: json["label"]?.stringValue ?? name, secure: json["secure"]?.boolValue ?? false)
    }
}
