import Foundation

/// The commands every server has, whatever its view-models: `help`, `ping`,
/// `state`, `wait`, `quit`, the alert answers `confirm`/`cancel`, and the admin
/// commands `sessions`, `info`, `slowlog` and `fault`.
extension Session {
    /// The built-ins `help` lists before the view-models' commands.
    static let leadingBuiltIns: Set<String> = ["help", "ping", "state", "wait", "quit", "attach", "end-others"]

    /// The longest `wait` a client may ask for: an hour.
    static let maximumWaitMilliseconds = 3_600_000

    /// `ping`'s result, a constant of the binary: its reply copies the bytes.
    private static let pong = EncodedResult(constant: #"{"pong":true}"#)

    static let builtInCommands: [AnyCommand] = [
        AnyCommand(
            spec: CommandSpec(
                "help", summary: "List every command with its usage, or show one command with an example.",
                arguments: [BuiltInArgument.command.argument], example: "help confirm"
            )
        ) { session, args in
            guard let name = args[BuiltInArgument.command] else { return session.application.helpResult }
            guard let spec = session.application.commands.spec(named: name) else {
                throw ProtocolError(.unknownCommand, "unknown command \"\(name)\"; help lists every command")
            }
            return ["command": spec.json]
        }.answeringForTheServer(),
        AnyCommand.encoding(spec: CommandSpec("ping", summary: "Check the connection; replies {\"pong\":true}.")) { _, _ in
            pong
        },
        AnyCommand.encoding(
            spec: CommandSpec(
                "state", summary: "Show the current state of one view, or of all views.",
                arguments: [BuiltInArgument.view.argument], example: "state search"
            )
        ) { session, args in try stateResult(in: session, args) },
        AnyCommand(
            spec: CommandSpec(
                "wait", summary: "Reply once no background work is running (default timeout 10000 ms): handy at the end of a script.",
                arguments: [BuiltInArgument.timeout.argument],
                example: "wait 5000"
            ),
            awaiting: .waiting  // the events of the work it waits for flow meanwhile
        ) { session, args async throws in
            let timeout = args[BuiltInArgument.timeout] ?? 10_000
            guard await session.waitUntilSettled(timeout: .milliseconds(timeout)) else {
                throw ProtocolError(.timeout, "background work still running after \(timeout) ms")
            }
            return ["settled": true]
        },
        AnyCommand(spec: CommandSpec("quit", summary: "Say goodbye and close the connection."), awaiting: .ending) { session, _ async throws in
            // In a cluster the record goes before the reply: an acknowledged quit is
            // never undone by a crash (another node would restore the session). Once
            // acknowledged, the session ends on every connection and this one is told
            // `bye quit` (``Session/finished``).
            try await session.application.cluster?.forget(session)
            // Recorded (its record deleted): the session ends even if this node's
            // lease lapsed meanwhile, and the reply says so.
            session.replyIsDurable = session.application.cluster != nil
            return ["bye": true]
        },
        AnyCommand.moving(
            spec: CommandSpec(
                "attach",
                summary:
                    "Join the session that owns token (this connection's own session is dropped); with last-rev, get every event after it again.",
                arguments: [BuiltInArgument.token.argument, BuiltInArgument.lastRev.argument], example: "attach 3f9c…e1 42"
            )
        ) { session, request, origin in
            await session.application.attach(request, from: session, origin: origin)
        },
        AnyCommand(
            spec: CommandSpec(
                "end-others",
                summary:
                    "End every other connection to this session and give it a new token: a link or token someone else holds no longer joins it. Replies the new token."
            )
        ) { session, _ async throws in
            guard let connection = Session.commandConnection else {
                throw ProtocolError(.badToken, "end-others needs a connection of its own")
            }
            // Nothing changes until the new token is durable: in a cluster its digest is
            // recorded first (a failover never lets the old token back in), and when the
            // database does not take it the session, its token and its other
            // connections stay as they were (`unavailable`: try again).
            let fresh = try session.beginTokenChange()
            let attempted = session.recordRev + 1
            do {
                try await session.application.cluster?.recordToken(fresh, of: session)
            } catch {
                session.endTokenChange()
                // It may have committed all the same (its reply lost): the next record
                // puts the token the session keeps back above it — above the rev it was
                // written at, which events during the write's hop may have raised.
                session.tokenRecordFailed(at: max(attempted, session.tokenRecordAttempt))
                throw error
            }
            session.endTokenChange()
            let ended = session.revokeOtherConnections(keeping: connection, newToken: fresh)
            // Recorded: the change happened, and the reply says so even if this node's
            // lease lapsed meanwhile (the record carries the new token wherever the
            // session goes next).
            session.replyIsDurable = session.application.cluster != nil
            return ["ended": .int(ended), "token": .string(fresh)]
        }.withSecretResults(["token"]),
        AnyCommand(
            spec: CommandSpec(
                "sessions", summary: "Count the server's live sessions and those with a connection (admin only).", adminOnly: true
            )
        ) { session, _ in
            let counts = session.application.sessions.counts
            return ["sessions": .int(counts.sessions), "attached": .int(counts.attached)]
        }.answeringForTheServer(),
        AnyCommand(
            spec: CommandSpec(
                "info",
                summary: "The server's figures as JSON, grouped like redis's INFO: server, clients, sessions, commands, cluster (admin only).",
                adminOnly: true, inspector: true
            )
        ) { session, _ in
            session.application.info
        },
        AnyCommand(
            spec: CommandSpec(
                "inspect",
                summary:
                    "The node's sessions (bare or `sessions`; the 500 last active of at most 5,000 read), or one session's timeline, events and views at a rev (admin only).",
                arguments: [BuiltInArgument.session.argument, BuiltInArgument.fromRev.argument],
                example: "inspect s12 40", adminOnly: true, inspector: true
            )
        ) { session, args async throws in try await inspect(from: session, args) },
        AnyCommand(
            spec: CommandSpec(
                "export",
                summary:
                    "One session's recording as a transcript to replay as a test: its commands, backend answers, clock and events (admin only).",
                arguments: [BuiltInArgument.exportedSession.argument],
                example: "export s12", adminOnly: true, inspector: true
            )
        ) { session, args async throws in
            let id = args[BuiltInArgument.exportedSession]
            guard let target = session.application.sessions.all.first(where: { $0.id == id }) else {
                throw ProtocolError(.badArguments, "no session \(id) on this node; inspect lists them")
            }
            return try target === session ? session.transcript() : await target.transcript()
        },
        AnyCommand(
            spec: CommandSpec(
                "inspector",
                summary: "Give the server's inspector token: this connection may then run inspect, info and export.",
                arguments: [BuiltInArgument.inspectorToken.argument], example: "inspector 6f1d…9a"
            ),
            awaiting: .delayingFailures
        ) { session, args async throws in
            guard let connection = Session.commandConnection else {
                throw ProtocolError(.badToken, "inspector needs a connection of its own")
            }
            if session.application.admin { return ["inspector": true] }  // every admin command is open already
            guard let digest = session.application.inspectorTokenDigest else {
                throw ProtocolError(
                    .adminDisabled, "this server has no inspector; start it with --admin, --inspector-token-file or VIEWLINE_INSPECTOR_TOKEN_FILE")
            }
            // Guesses are counted per address (the session's: a connection reaches
            // another address's session only with its token), on top of the second
            // each wrong one costs its own connection: many connections from one
            // address guess no faster than a few.
            let throttle = session.application.attachPolicy.throttle
            let keys = FailureThrottle.key("inspector", peer: session.peer)
            if let seconds = throttle.wait(for: keys, now: FailureThrottle.monotonicNow()) {
                throw ProtocolError(.badToken, "too many wrong inspector tokens from this address; try again in \(seconds) s", retryAfter: seconds)
            }
            guard SessionRegistry.constantTimeEqual(Cluster.digest(Array(args[BuiltInArgument.inspectorToken].utf8)), digest) else {
                // Counted before the delay, so guesses sent side by side meet the throttle
                // too; at most a few are logged per address before it holds them back.
                throttle.failed(keys, now: FailureThrottle.monotonicNow())
                session.logger.warning("a wrong inspector token", metadata: ["connection": "\(connection)"])
                // A wrong guess costs its connection a second (its next line waits behind it).
                try? await Task.sleep(for: Session.wrongInspectorTokenDelay)
                throw ProtocolError(.badToken, "that is not this server's inspector token")
            }
            session.inspectorConnections.insert(connection)
            return ["inspector": true]
        },
        AnyCommand(
            spec: CommandSpec(
                "slowlog", summary: "The newest commands slower than the server's threshold, newest first (default 10, at most 128; admin only).",
                arguments: [BuiltInArgument.slowCount.argument],
                example: "slowlog 5", adminOnly: true
            )
        ) { session, args in
            let count = args[BuiltInArgument.slowCount] ?? 10
            let log = session.application.slowLog
            return [
                "thresholdMs": .int(Int(log.threshold.components.seconds * 1000 + log.threshold.components.attoseconds / 1_000_000_000_000_000)),
                "entries": .array(
                    log.newest(count).map { entry in
                        [
                            "id": .int(entry.id), "time": .string(entry.time.formatted(.iso8601)), "session": .string(entry.session),
                            "command": .string(entry.command), "durationMs": .double(Double(entry.duration.nanoseconds) / 1e6),
                        ]
                    }),
            ]
        }.answeringForTheServer(),
        AnyCommand(
            spec: CommandSpec(
                "confirm", summary: "Answer the presented alert with its confirm action, filling its input fields.",
                arguments: [BuiltInArgument.alert.argument, BuiltInArgument.fields.argument],
                example: "confirm a2 user=alice password=wonderland"
            )
        ) { session, args in
            try session.answerAlert(id: args[BuiltInArgument.alert], confirm: true, fields: args[BuiltInArgument.fields])
        },
        AnyCommand(
            spec: CommandSpec(
                "cancel", summary: "Answer the presented alert with its cancel action.",
                arguments: [BuiltInArgument.alert.argument],
                example: "cancel a2"
            )
        ) { session, args in
            try session.answerAlert(id: args[BuiltInArgument.alert], confirm: false, fields: [:])
        },
        AnyCommand(
            spec: CommandSpec(
                "fault", summary: "Make the next count calls (default 1) of a backend service fail (admin only).",
                arguments: [BuiltInArgument.service.argument, BuiltInArgument.faultCount.argument, BuiltInArgument.message.argument],
                example: "fault save 2 disk full", adminOnly: true
            )
        ) { session, args in
            let application = session.application
            let name = args[BuiltInArgument.service].lowercased()
            guard let backend = application.backends.first(where: { $0.name == name }) else {
                throw ProtocolError(
                    .unknownService,
                    "no service named \"\(args[BuiltInArgument.service])\"; services: \(application.backends.map(\.name).joined(separator: ", "))")
            }
            let count = args[BuiltInArgument.faultCount] ?? 1
            application.faults.arm(backend.name, count: count, message: args[BuiltInArgument.message])
            return ["service": .string(backend.name), "count": .int(count)]
        },
    ]

    /// The most sessions `inspect` lists, and the most it reads to choose them: each
    /// read is a hop to that session's executor, so a node of 100,000 sessions is
    /// sampled (in registry order), not read whole on every refresh.
    static let inspectedSessions = 500
    static let sessionsReadForInspect = 5_000

    /// `inspect [session] [from-rev]`: read from each session on its own executor.
    private static func inspect(from session: isolated Session, _ args: Arguments) async throws -> JSON {
        let application = session.application
        let node: JSON =
            application.cluster.map { cluster in
                let this = cluster.node
                return ["id": .string(cluster.nodeID), "address": .string(this.address), "release": .string(this.release)]
            } ?? .null
        let all = application.sessions.all
        // `inspect sessions` (no session is called that: ids are `s`, a number and a node's part) is
        // the list, as bare `inspect` is.
        guard let id = args[BuiltInArgument.session], id.lowercased() != listWord else {
            var summaries: [JSON] = []
            summaries.reserveCapacity(min(all.count, sessionsReadForInspect))
            // Read in turn, each on its own executor.
            for other in all.prefix(sessionsReadForInspect) {
                summaries.append(other === session ? session.inspectionSummary() : await other.inspectionSummary())
            }
            summaries.sort { ($0["lastCommandAt"]?.stringValue ?? "") > ($1["lastCommandAt"]?.stringValue ?? "") }
            return [
                "node": node, "count": .int(all.count), "read": .int(min(all.count, sessionsReadForInspect)),
                "recording": .bool(application.inspects),
                "sessions": .array(Array(summaries.prefix(inspectedSessions))),
                "unreadableRecords": application.unreadableRecordsJSON,
            ]
        }
        guard let target = all.first(where: { $0.id == id }) else {
            throw ProtocolError(.badArguments, "no session \(id) on this node; inspect lists them")
        }
        let from = args[BuiltInArgument.fromRev]
        var inspection = target === session ? session.inspection(from: from) : await target.inspection(from: from)
        if case .object(var object) = inspection {
            object["node"] = node
            inspection = .object(object)
        }
        return inspection
    }

    /// What `inspect` lists the node's sessions for, in its session's place.
    static let listWord = "sessions"

    /// How long a wrong `inspector` token keeps its connection waiting.
    static let wrongInspectorTokenDelay = Duration.seconds(1)

    /// `state`'s result, from the states' kept encodings: the reply copies their bytes.
    private static func stateResult(in session: isolated Session, _ args: Arguments) throws -> EncodedResult {
        let views = session.application.views
        guard let name = args[BuiltInArgument.view] else {
            var parts = [Array(#"{"views":{"#.utf8)]
            for index in views.indices {
                var key = index > 0 ? [UInt8(ascii: ",")] : []
                JSON.string(views[index].name).write(into: &key)
                key.append(UInt8(ascii: ":"))
                parts += [key, session.encodedState(index).bytes]
            }
            return EncodedResult(parts + [Array("}}".utf8)])
        }
        guard let index = session.application.index(ofView: name) else {
            throw ProtocolError(.unknownView, "no view named \"\(name)\"; views: \(views.map(\.name).joined(separator: ", "))")
        }
        return EncodedResult([session.application.viewCodings[index].stateReplyHead, session.encodedBytes(index), stateReplyTail])
    }

    private static let stateReplyTail = [UInt8(ascii: "}")]
}
