/// One connection attached to a session: how to send it a message and how to
/// hang up on it.
package struct SessionConnection: Sendable {
    private enum Output: Sendable {
        case closures(send: @Sendable (ServerMessage) -> Void, close: @Sendable () -> Void)
        /// A network connection: takes encoded lines, and is one reference (an idle
        /// session keeps no closures for it).
        case lines(any LineOutput)
    }

    private let output: Output

    /// A connection from how to send to it and how to close it.
    package init(send: @escaping @Sendable (ServerMessage) -> Void, close: @escaping @Sendable () -> Void) {
        output = .closures(send: send, close: close)
    }

    /// A connection that takes encoded lines (each ending in `\n`).
    init(_ lines: any LineOutput) {
        output = .lines(lines)
    }

    /// Sends one message to this connection.
    package func send(_ message: ServerMessage) {
        switch output {
        case .closures(let send, _): send(message)
        case .lines(let lines): lines.send(line: message.line)
        }
    }

    /// Sends an encoded line (a replayed event): a test's connection gets it
    /// decoded back into a message.
    func send(line: [UInt8]) {
        switch output {
        case .closures(let send, _):
            if let message = ServerMessage(line: line) { send(message) }
        case .lines(let lines): lines.send(line: line)
        }
    }

    /// Sends a successful reply whose result is already encoded: a network
    /// connection writes its parts straight into its outbound buffer (no line made
    /// first); one that takes messages gets the reply as a message.
    func send(reply re: JSON, result: EncodedResult) {
        switch output {
        case .closures(let send, _): send(.reply(re: re, result: .success(result.json)))
        case .lines(let lines): lines.send(reply: re, result: result)
        }
    }

    /// Sends a message whose line is already encoded: a session encodes each event
    /// once, however many connections and logs it goes to.
    func send(_ message: ServerMessage, line: [UInt8]) {
        switch output {
        case .closures(let send, _): send(message)
        case .lines(let lines): lines.send(line: line)
        }
    }

    /// Hangs up on this connection.
    package func close() {
        switch output {
        case .closures(_, let close): close()
        case .lines(let lines): lines.hangUp()
        }
    }
}

/// Where a network connection's lines go.
protocol LineOutput: AnyObject, Sendable {
    /// Queues one encoded line (ending in `\n`).
    func send(line: [UInt8])
    /// Queues a successful reply whose result is already encoded.
    func send(reply re: JSON, result: EncodedResult)
    /// Closes the connection.
    func hangUp()
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
    /// with `quit`, eviction or expiry): the caller answers `bad_token`.
    @discardableResult
    package func attach(_ connection: SessionConnection, as number: Int, lastRev: Int?, re: JSON) throws(ProtocolError) -> Bool {
        guard !closed else { return false }
        if let lastRev, lastRev < 0 {
            throw ProtocolError(.badArguments, "last-rev must be 0 or more (got \(lastRev))")
        }
        var missed = lastRev.flatMap { log.lines(after: $0, current: rev) }
        if restoredFromRecord, let lastRev, lastRev > rev {
            // A restored session's revs start a whole ``maximumRecordLag`` above its
            // record's: no owner ever sent this one.
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
        let before = connections.count
        connections[number] = connection
        let result: JSON = [
            "session": .string(id), "rev": .int(rev), "replayed": .int(missed?.count ?? 0), "snapshot": .bool(missed == nil),
        ]
        connection.send(.reply(re: re, result: .success(result)))
        if let missed {
            for line in missed { connection.send(line: line) }
        } else {
            sendSnapshot()
        }
        connectionCountChanged(from: before)
        return true
    }

    /// How many events a restored session's record may trail the client: far more
    /// than a node emits between two record batches, far less than `rev` can hold.
    static let maximumRecordLag = 1 << 32

    /// Detaches a connection; the session goes on without it.
    package func detach(_ number: Int) {
        let before = connections.count
        connections[number] = nil
        _ = held.end(number)
        connectionCountChanged(from: before)
    }

    /// The server's own view (PROTOCOL §4.1): `{count}`, how many connections the
    /// session has. Sent to every connection when the count changes while more than
    /// one is or was attached, so each face can say "open in 2 places" and offer
    /// `end-others`; a client that never saw it has the only connection.
    static let connectionsView = "connections"

    private func connectionCountChanged(from before: Int) {
        let count = connections.count
        guard count != before, max(before, count) > 1, !closed else { return }
        emitDisplay(view: Self.connectionsView, state: EncodedState(["count": .int(count)]))
    }

    /// `end-others`: every connection but `kept` is told `bye` (`revoked`) and closed,
    /// and the token gets a new secret, so a link or token someone else holds no
    /// longer joins the session (whoever holds the session can always see and drive
    /// it: this is how a person takes it back). Returns how many connections ended
    /// and the new token, which only `kept` learns.
    func revokeOtherConnections(keeping kept: Int) -> (ended: Int, token: String) {
        let token = changeTokenSecret()
        let before = connections.count
        var ended = 0
        for (number, connection) in connections where number != kept {
            answerUnfinished(number, on: connection)
            connection.send(.bye(.revoked))
            connection.close()
            connections[number] = nil
            _ = held.end(number)
            ended += 1
        }
        application.cluster?.changed(self)  // the record carries the new token's digest
        connectionCountChanged(from: before)
        return (ended, token)
    }

    /// The lease is valid again and the session is still this node's: what was withheld
    /// meanwhile is sent as every view's state (and the alert) again.
    func leaseRestored() {
        guard withheldWithoutLease, !closed else { return }
        withheldWithoutLease = false
        sendSnapshot()
    }

    /// Every view's state and the presented alert, as new events to every connection.
    private func sendSnapshot() {
        for index in application.views.indices { display(index) }
        if let alert = presentedAlert {
            emit { .alert(rev: $0, id: alert.id, content: alert.content) }
        }
    }
}

extension Session {
    /// Adds a connection without a reply: the first connection, which gets `welcome`.
    package func connect(_ connection: SessionConnection, as number: Int) {
        guard !closed else { return }
        let before = connections.count
        connections[number] = connection
        connectionCountChanged(from: before)
    }
}
