import ViewlineProtocol

/// The built-in commands' arguments, each declared once and read through the same
/// token (``ArgumentKey``), as a view-model's are.
enum BuiltInArgument {
    static let command = ArgumentKey.optionalWord("command").described("a command to show alone")
    static let view = ArgumentKey.optionalWord("view").described("one view; all of them without it")
    static let timeout = ArgumentKey.optionalInteger(
        "timeout", maximum: Session.maximumWaitMilliseconds, unit: "milliseconds", placeholder: "timeout-ms"
    ).described("how long to wait, in milliseconds (10,000 by default)")
    static let token = ArgumentKey.word("token", secure: true).described("the session's token, from its welcome or a `token` shown elsewhere")
    static let lastRev = ArgumentKey.optionalInteger("lastRev", placeholder: "last-rev").described(
        "the last rev this client saw: what came after is replayed")
    static let inspectorToken = ArgumentKey.word("token", secure: true).described("the inspector token the server was started with")
    static let session = ArgumentKey.optionalWord("session").described("a session's id (s12) on this node; the list without it or with `sessions`")
    static let exportedSession = ArgumentKey.word("session").described("a session's id (s12) on this node")
    static let fromRev = ArgumentKey.optionalInteger("from", minimum: 0, placeholder: "from-rev").described(
        "the rev whose states to show, and after which the timeline and events start (the oldest kept without it)")
    static let slowCount = ArgumentKey.optionalInteger("count", minimum: 1, maximum: SlowLog.capacity).described(
        "how many of the slowest to list")
    static let alert = ArgumentKey.optionalWord("alert", placeholder: "alert-id").described(
        "the alert to answer; the presented one without it")
    static let fields = ArgumentKey.fields("fields").described("the alert's input fields, name=value")
    static let service = ArgumentKey.word("service").described("a backend `help` lists under services")
    static let faultCount = ArgumentKey.optionalInteger("count", maximum: 1_000_000).described(
        "how many of its next calls fail (1 by default; 0 clears)")
    static let message = ArgumentKey.optionalText("message").described("what the failure says")
}
