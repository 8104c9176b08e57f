/// The connection a command came from, as the command path needs it: the number its
/// reply goes to and, for a client connection of the server, what a command that
/// moves it to another session (`attach`) needs.
package struct CommandOrigin: Sendable {
    /// The session's number for the connection: its reply goes there.
    package let connection: Int
    /// The network connection, when there is one (`nil`: a test's or a single client's
    /// numbered output, which cannot move).
    let client: (any MovableConnection)?

    /// A numbered output of the session's (a test, a single client).
    package init(connection: Int) {
        self.connection = connection
        client = nil
    }

    init(connection: Int, client: any MovableConnection) {
        self.connection = connection
        self.client = client
    }
}

/// A client connection `attach` can move from one session to another.
protocol MovableConnection: AnyObject, Sendable {
    /// The connection as a session sees it.
    var link: SessionConnection { get }
    /// The session the connection was given at `welcome`, while it is still on it:
    /// leaving it with no connection ends it (nobody else knows it).
    var ownSession: Session? { get }
    /// The client's address, as per-address limits key on it.
    var peer: String? { get }
}
