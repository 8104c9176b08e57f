/// One connection attached to a session: how to send it a line and how to hang
/// up on it.
///
/// A session builds each event once, as the bytes of its line; every connection
/// gets those bytes. A connection made from closures (a test's, or an in-process
/// caller's) gets each line parsed back into a ``ServerMessage``, as a client
/// would read it.
package struct SessionConnection: Sendable {
    private let lines: any LineOutput

    /// A connection from how to send to it and how to close it: `send` gets each
    /// line the session writes, parsed.
    package init(send: @escaping @Sendable (ServerMessage) -> Void, close: @escaping @Sendable () -> Void) {
        lines = ParsedLines(send: send, close: close)
    }

    /// A connection that takes encoded lines (each ending in `\n`).
    init(_ lines: any LineOutput) {
        self.lines = lines
    }

    /// Sends one message to this connection (a reply, a `bye`).
    package func send(_ message: ServerMessage) {
        lines.send(line: message.line)
    }

    /// Sends an encoded line (an event, or one replayed from the log).
    func send(line: [UInt8]) {
        lines.send(line: line)
    }

    /// Sends a successful reply whose result is already encoded: a network
    /// connection writes its parts straight into its outbound buffer (no line made
    /// first).
    func send(reply re: JSON, result: EncodedResult) {
        lines.send(reply: re, result: result)
    }

    /// Sends a `display` from its parts: a network connection writes them straight
    /// into its outbound buffer (no line made first).
    func send(display: DisplayEvent) {
        lines.send(display: display)
    }

    /// Hangs up on this connection.
    package func close() {
        lines.hangUp()
    }
}

/// Where a network connection's lines go.
protocol LineOutput: AnyObject, Sendable {
    /// Queues one encoded line (ending in `\n`).
    func send(line: [UInt8])
    /// Queues a successful reply whose result is already encoded.
    func send(reply re: JSON, result: EncodedResult)
    /// Queues a `display` from its parts.
    func send(display: DisplayEvent)
    /// Closes the connection.
    func hangUp()
}

/// A connection that reads the session's lines as a client does: each one parsed
/// into a ``ServerMessage`` and handed to a closure.
private final class ParsedLines: LineOutput {
    private let deliver: @Sendable (ServerMessage) -> Void
    private let close: @Sendable () -> Void

    init(send: @escaping @Sendable (ServerMessage) -> Void, close: @escaping @Sendable () -> Void) {
        deliver = send
        self.close = close
    }

    func send(line: [UInt8]) {
        guard let message = ServerMessage(line: line) else {
            preconditionFailure("the session wrote a line no client can read: \(String(decoding: line, as: UTF8.self))")
        }
        deliver(message)
    }

    func send(reply re: JSON, result: EncodedResult) {
        var line: [UInt8] = []
        result.writeReply(re: re) { line.append(contentsOf: $0) }
        send(line: line)
    }

    func send(display: DisplayEvent) {
        send(line: display.line)
    }

    func hangUp() { close() }
}

/// Connections coming and going: a session outlives them.
extension Session {
    /// How many connections are attached.
    package var connectionCount: Int { connections.count }

    /// Whether the session ended (`quit`, expiry, shutdown).
    package var isClosed: Bool { closed }

    /// Attaches a connection as number `number`.
    ///
    /// With `lastRev`, the reply is followed by every event after it, again, with
    /// its original `rev` — from the event log, if it still reaches back that far.
    /// Otherwise (or without `lastRev`) the client gets a snapshot: one `display`
    /// per view and the presented alert again, as new events. The reply
    /// (`{session, rev, replayed, snapshot}`, echoing `re`) comes first.
    ///
    /// A `lastRev` after the session's own `rev` gets a snapshot; it is never
    /// adopted, except by a session just restored from its cluster record, whose
    /// record may trail what the client saw on the node that died by at most
    /// ``maximumRecordLag`` events (a `lastRev` further ahead is refused).
    ///
    /// Returns `false`, sending nothing, when the session already ended (a race
    /// with `quit`, eviction or expiry), or when `token` (what the connection attached
    /// with) is no longer the session's: an `end-others` came between its lookup and
    /// this join, which is the step that checks it, on the session's own executor, so
    /// no attach that began before `end-others` joins after it. The caller answers
    /// `bad_token`.
    @discardableResult
    package func attach(
        _ connection: SessionConnection, as number: Int, lastRev: Int?, re: JSON, token presented: String? = nil
    ) throws(ProtocolError) -> Bool {
        guard !closed else { return false }
        if let presented, !SessionRegistry.constantTimeEqual(Array(presented.utf8), Array(token.utf8)) { return false }
        if let lastRev, lastRev < 0 {
            throw ProtocolError(.badArguments, "last-rev must be 0 or more (got \(lastRev))")
        }
        if withheldWithoutLease {
            // What a lapse of the lease withheld goes to the connections first: the
            // replay or snapshot below reaches up to `rev`, and the withheld events
            // sent after it would come to this connection a second time, out of order.
            // While the lease is still not valid, no one attaches.
            leaseRestored()
            if withheldWithoutLease { throw Cluster.noLease }
        }
        var missed = lastRev.flatMap { log.lines(after: $0, current: rev) }
        if restoredFromRecord, let lastRev, lastRev > rev {
            // A restored session's revs start a whole ``maximumRecordLag`` above its
            // record's: no owner ever sent this one.
            logger.warning(
                "attach refused: a last-rev ahead of anything this session sent",
                metadata: [
                    "last-rev": "\(lastRev)", "rev": "\(rev)",
                ])
            throw ProtocolError(.badArguments, "last-rev \(lastRev) is ahead of anything this session sent (rev \(rev))")
        }
        if restoredFromRecord {
            // The record may be older than what the client saw on the node that died:
            // no replay, and the snapshot's revs come after anything it has (the old
            // owner's revs are all below this owner's; a later last-rev from it finds
            // nothing in the log and gets a snapshot as well).
            restoredFromRecord = false
            log.removeAll()
            missed = nil
        }
        if isFull { throw Self.full(connections.count) }
        let before = connections.count
        connections[number] = connection
        let result: JSON = [
            "session": .string(id), "rev": .int(rev), "replayed": .int(missed?.count ?? 0), "snapshot": .bool(missed == nil),
        ]
        connection.send(.reply(re: re, result: .success(result)))
        note(.connection(number, what: "attach"))
        if let missed {
            for line in missed { connection.send(line: line) }
        } else {
            sendSnapshot(to: connection, views: application.views.indices)
        }
        connectionCountChanged(from: before)
        return true
    }

    /// What an `attach` to a session that has its cap of connections gets.
    static func full(_ count: Int) -> ProtocolError {
        ProtocolError(.serverBusy, "the session already has \(count) connections, the most it may have; end one first", retryAfter: 1)
    }

    /// How many events a restored session's record may trail the client: far more
    /// than a node emits between two record batches, far less than `rev` can hold.
    static let maximumRecordLag = SessionRecord.maximumLag

    /// Detaches a connection; the session goes on without it.
    package func detach(_ number: Int) {
        let before = connections.count
        connections.removeValueReleasingStorage(forKey: number)
        inspectorConnections.remove(number)
        _ = held.end(number)
        note(.connection(number, what: "detach"))
        connectionCountChanged(from: before)
    }

    /// The server's own view (PROTOCOL §4.1): `{count}`, how many connections the
    /// session has. Sent to every connection when the count changes while more than
    /// one is or was attached, so each face can say "open in 2 places" and offer
    /// `end-others`; a client that never saw it has the only connection.
    static let connectionsView = "connections"
    private static let connectionsViewPart = DisplayEvent.viewPart(connectionsView)

    /// The count changed: shown once at the end of this loop tick, however many
    /// connections came and went meanwhile (a storm of attaches costs one display per
    /// tick, not one per attach to every connection).
    private func connectionCountChanged(from before: Int) {
        guard !closed, connectionCountShownAt == nil else { return }
        connectionCountShownAt = before
        eventLoop.execute { [self] in
            assumeIsolated { $0.showConnectionCount() }
        }
    }

    private func showConnectionCount() {
        guard let before = connectionCountShownAt else { return }
        connectionCountShownAt = nil
        let count = connections.count
        guard count != before, max(before, count) > 1, !closed else { return }
        emitDisplay(viewPart: Self.connectionsViewPart, state: EncodedState(["count": .int(count)]))
    }

    /// `end-others`, once `newToken` is recorded: every connection but `kept` is told
    /// `bye` (`revoked`) and closed, and the token becomes `newToken`, so a link or
    /// token someone else holds no longer joins the session (whoever holds the session
    /// can always see and drive it: this is how a person takes it back). Returns how
    /// many connections ended; only `kept` learns the new token.
    func revokeOtherConnections(keeping kept: Int, newToken: String) -> Int {
        adoptToken(newToken)
        let before = connections.count
        var ended = 0
        for (number, connection) in connections where number != kept {
            answerUnfinished(number, on: connection)
            connection.send(.bye(.revoked))
            connection.close()
            connections.removeValueReleasingStorage(forKey: number)
            inspectorConnections.remove(number)
            _ = held.end(number)
            note(.connection(number, what: "bye revoked"))
            ended += 1
        }
        application.cluster?.changed(self)  // the record carries the new token's digest
        connectionCountChanged(from: before)
        return ended
    }

    /// The lease is valid again and the session is still this node's: the events
    /// withheld meanwhile go out now, in order, with the revs they were given, so every
    /// connection's revs stay contiguous (PROTOCOL §2.2); when the log no longer
    /// reaches back that far, the views the client has been shown (and the alert) are
    /// sent again as new events.
    func leaseRestored() {
        guard withheldWithoutLease, !closed else { return }
        guard leased else { return }
        withheldWithoutLease = false
        if let missed = log.lines(after: sentRev, current: rev) {
            sentRev = rev
            for line in missed { deliver(line) }
        } else {
            for index in application.views.indices where displayedViews.contains(index) { display(index) }
            if let alert = presentedAlert {
                emit { .alert(rev: $0, id: alert.id, content: alert.content) }
            }
        }
    }

    /// A snapshot for one connection (PROTOCOL §2.1): the state of each of `views`
    /// and the presented alert, each a new event with the next `rev`, kept in the event
    /// log like any other — but sent only to the connection that attached. The others
    /// already show that state: to them the snapshot's revs are a gap, never a repeat,
    /// so an attach costs the one connection that asked.
    private func sendSnapshot(to connection: SessionConnection, views: some Sequence<Int>) {
        for index in views {
            displayedViews.insert(index)
            emitDisplay(viewPart: application.viewCodings[index].displayViewPart, state: encodedState(index), only: connection)
        }
        if let alert = presentedAlert {
            emit(only: connection) { .alert(rev: $0, id: alert.id, content: alert.content) }
        }
    }
}

extension Session {
    /// Detaches a connection that is attaching to another session, and returns the
    /// token the session had at that step: ``rejoin(_:as:left:)`` checks it. `nil`
    /// when the connection is no longer on the session: it was told `bye` while its
    /// `attach` waited (the session ended, or `end-others` revoked it), and nothing
    /// may follow that `bye` — not the attach's reply, not another session's snapshot.
    package func leave(_ number: Int) -> String? {
        guard !closed, connections[number] != nil else { return nil }
        detach(number)
        return token
    }

    /// Takes back a connection whose attach elsewhere failed. Returns `false`, adding
    /// nothing, when `end-others` changed the token since the connection left: it was
    /// one of the others then, and must not come back after it (the caller revokes it).
    ///
    /// Also `false` when the session took its cap of connections meanwhile (others
    /// attached into the place this one left): the cap holds for every way in.
    package func rejoin(_ connection: SessionConnection, as number: Int, left: String) -> Bool {
        guard SessionRegistry.constantTimeEqual(Array(left.utf8), Array(token.utf8)) else { return false }
        guard !isFull else { return false }
        connect(connection, as: number)
        return true
    }

    /// Whether the session has as many connections as one may (``SessionLimits/maximumConnectionsPerSession``).
    package var isFull: Bool {
        let limit = application.sessions.limits.maximumConnectionsPerSession
        return limit > 0 && connections.count >= limit
    }

    /// Adds a connection without a reply: the first connection, which gets `welcome`.
    package func connect(_ connection: SessionConnection, as number: Int) {
        guard !closed else { return }
        let before = connections.count
        connections[number] = connection
        note(.connection(number, what: "connect"))
        connectionCountChanged(from: before)
    }
}
