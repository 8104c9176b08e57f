import Logging

/// The command path: every command a session runs, from any connection, goes through
/// ``begin(_:from:)`` and ends in ``finished(_:_:command:started:from:holding:)``. What the
/// declaration says (``AnyCommand/Body``) decides how it runs; the immediate case is
/// `begin`'s fast path, the rest goes on in ``resume(_:from:)``.
///
/// Kept here, once: whether the command may run now (the session lives, this node
/// holds its lease and can record what it acknowledges), who may run it (admin),
/// the reply before the events it caused (``HeldEvents``), the slow log and the
/// metrics.
extension Session {
    /// What the connection does after a command.
    package enum Step: Sendable, Equatable {
        /// Reads on.
        case next
        /// Goes on on another session (`attach`).
        case moved(Session)
        /// Ends once what was sent to it is written (`quit` acknowledged: its `bye`
        /// is out).
        case endConnection
        /// The session ended under the connection: the connection says so (a `bye`,
        /// unless it was told one) and ends.
        case sessionEnded

        package static func == (lhs: Step, rhs: Step) -> Bool {
            switch (lhs, rhs) {
            case (.next, .next), (.endConnection, .endConnection), (.sessionEnded, .sessionEnded): true
            case (.moved(let a), .moved(let b)): a === b
            default: false
            }
        }
    }

    /// A command that began and awaits: ``resume(_:from:)`` runs the rest.
    struct Suspended: Sendable {
        let request: Request
        let command: AnyCommand
    }

    /// How far ``begin(_:from:)`` took a command.
    enum Begun: Sendable {
        /// Done: its reply and events are out.
        case finished(Step)
        /// It awaits: the caller resumes it (in order with the connection's next lines).
        /// (Boxed: the common case, `finished`, then moves a word, not a request.)
        indirect case suspended(Suspended)
    }

    /// Runs one command from `origin` and sends it the reply, then every attached
    /// connection the events the command caused.
    package func run(_ request: Request, from origin: CommandOrigin) async -> Step {
        switch begin(request, from: origin) {
        case .finished(let step): return step
        case .suspended(let command): return await resume(command, from: origin)
        }
    }

    /// ``run(_:from:)`` from a numbered output of the session's (a test, a single
    /// client): whether that connection should close now.
    package func handle(_ request: Request, from connection: Int = 0) async -> Outcome {
        await run(request, from: CommandOrigin(connection: connection)) == .endConnection ? .close : .keepOpen
    }

    /// Runs `request` as far as it goes without suspending: all of an immediate
    /// command (what a connection does in the read that brought it), with its reply
    /// and events; nothing yet of one that awaits, which ``resume(_:from:)`` checks
    /// and runs when its turn comes (so a line its connection leaves unrun, having
    /// hung up or been told `bye` meanwhile, holds nothing and was not served).
    func begin(_ request: Request, from origin: CommandOrigin) -> Begun {
        guard let command = application.handler(for: request, among: handlers) else {
            if let refused = admission(re: request.id, from: origin, command: request.name) { return .finished(refused) }
            let unknown = ProtocolError(.unknownCommand, "unknown command \"\(request.name)\"; try help")
            return .finished(finished(request, .failure(unknown), command: nil, started: now(), from: origin.connection, holding: false))
        }
        if let recording, recording.isOn { record(request, of: command, from: origin.connection, into: recording) }
        switch command.body {
        case .awaiting, .moving:
            return .suspended(Suspended(request: request, command: command))
        case .immediate(let perform):
            if let refused = admit(request, command, from: origin) { return .finished(refused) }
            let started = starting(origin.connection)
            flushesDisplaysAtEnd = true
            let answer: Reply
            do { answer = .result(try perform(self, request.arguments)) } catch { answer = .failure(protocolError(error, running: request.name)) }
            return .finished(finished(request, answer, command: command, started: started, from: origin.connection, holding: true))
        case .encoded(let perform):
            if let refused = admit(request, command, from: origin) { return .finished(refused) }
            let started = starting(origin.connection)
            flushesDisplaysAtEnd = true
            let answer: Reply
            do { answer = .encoded(try perform(self, request.arguments)) } catch { answer = .failure(protocolError(error, running: request.name)) }
            return .finished(finished(request, answer, command: command, started: started, from: origin.connection, holding: true))
        }
    }

    /// The checks every command passes just before it runs, once: ``admission(re:from:command:)``,
    /// then who may run it (admin). `nil`: it runs, and is logged as served here.
    private func admit(_ request: Request, _ command: AnyCommand, from origin: CommandOrigin) -> Step? {
        if let refused = admission(re: request.id, from: origin, command: request.name) { return refused }
        if application.logsCommands { log(request) }
        if command.spec.adminOnly && !application.admin && !mayInspect(with: command, from: origin.connection) {
            let name = command.spec.name
            let refused =
                application.inspectorTokenDigest != nil && command.spec.opensToInspector
                ? ProtocolError(.adminDisabled, "\(name) needs the inspector token: send `inspector <token>` first")
                : ProtocolError(.adminDisabled, "\(name) is an admin command; start the server with --admin")
            return finished(request, .failure(refused), command: command, started: now(), from: origin.connection, holding: false)
        }
        return nil
    }

    /// Whether `connection` gave the inspector token and `command` is one of the
    /// inspector's.
    private func mayInspect(with command: AnyCommand, from connection: Int) -> Bool {
        !inspectorConnections.isEmpty && inspectorConnections.contains(connection) && command.spec.opensToInspector
    }

    /// Runs a command ``begin(_:from:)`` found awaits, and finishes it.
    func resume(_ suspended: Suspended, from origin: CommandOrigin) async -> Step {
        let (request, command, connection) = (suspended.request, suspended.command, origin.connection)
        if let refused = admit(request, command, from: origin) { return refused }
        switch command.body {
        case .immediate, .encoded:
            preconditionFailure("an immediate command never suspends")
        case .moving(let move):
            let started = now()
            let target = await move(self, request, origin)
            return finished(request, .replied(moved: target), command: command, started: started, from: connection, holding: false)
        case .awaiting(let perform, let way):
            // `wait`'s events are not held: it waits for the very work whose events they are.
            let started = way == .waiting ? now() : starting(connection)
            awaiting[connection] = request.id
            let answer: Reply
            do {
                answer = .result(
                    try await Self.$commandConnection.withValue(connection) {
                        try await SessionFence.$current.withValue(fence) { try await perform(self, request.arguments) }
                    })
            } catch {
                answer = .failure(protocolError(error, running: request.name))
            }
            // Answered already (`unfinished`) when its connection was told `bye`: it
            // still ends here (timed, counted, a `quit` that happened ends the
            // session), with nothing more sent to that connection.
            let answeredEarly = awaiting.removeValueReleasingStorage(forKey: connection) == nil && !closed
            return finished(
                request, answer, command: command, started: started, from: connection, holding: way != .waiting, answeredEarly: answeredEarly)
        }
    }

    /// A line that never became a command (bad JSON, too long): answered with
    /// `error`, when a command could be.
    func reject(_ error: ProtocolError, re: JSON, from origin: CommandOrigin) -> Step {
        if let refused = admission(re: re, from: origin, command: "unknown") { return refused }
        reject(re: re, error, to: origin.connection)
        return .next
    }

    /// Whether a command may run on this session now (`nil`), or what its connection
    /// does instead: the session ended (say so), or, in a cluster, this node holds no
    /// valid lease (another node may own the session by now), its records cannot be
    /// written (nothing acknowledged here would survive this node), or this session's
    /// own record is held back by another transaction's row lock: refused
    /// `unavailable` until the node (or the record) is back.
    private func admission(re: JSON, from origin: CommandOrigin, command name: String) -> Step? {
        if closed { return .sessionEnded }
        if let cluster = application.cluster, !cluster.acceptsCommands(for: self) {
            reject(re: re, Cluster.noLease, to: origin.connection, command: name)
            return .next
        }
        return nil
    }

    /// When a command started, and the session's rev then (its timeline entry's:
    /// the events it caused come after it).
    struct Start {
        let at: Moment
        let rev: Int
    }

    private func now() -> Start {
        Start(at: .now, rev: rev)
    }

    /// A command starts: its events are held for `connection` until its reply is out,
    /// and a drain waits for it.
    private func starting(_ connection: Int) -> Start {
        flushDisplays()  // what earlier work displayed precedes this command's reply
        held.begin(connection)
        commandsRunning += 1
        return now()
    }

    /// What a command answered.
    private enum Reply {
        case result(JSON)
        /// A result already encoded: its bytes go into the reply's line as they are.
        case encoded(EncodedResult)
        /// (Boxed: an error is nine words, and every reply, failed or not, is moved
        /// through this enum.)
        indirect case failure(ProtocolError)
        /// A command that moved its connection (`attach`): the session it is on now
        /// answered it (`nil`: it stayed, and was answered).
        case replied(moved: Session?)
    }

    /// A command is done: its reply goes out, then the events it caused; it is timed
    /// into the slow log and the metrics; the connection learns what it does next.
    /// `holding`: the command began with ``starting(_:)`` (its events are held).
    /// `answeredEarly`: its connection already got an answer for it (``answerUnfinished(_:on:with:)``),
    /// just before its `bye`: nothing more goes to it.
    private func finished(
        _ request: Request, _ outcome: consuming Reply, command: AnyCommand?, started: Start, from connection: Int, holding: Bool,
        answeredEarly: Bool = false
    ) -> Step {
        // What the command displayed is sent (or held for its connection) before its reply.
        flushesDisplaysAtEnd = false
        flushDisplays()
        // A command that finished after this node lost its lease answers `unavailable`,
        // never its (possibly stale) result. (The reply is moved, not copied: an
        // encoded result's parts are retained once.)
        let answer: Reply
        if leased || replyIsDurable {
            answer = outcome
        } else if case .replied = outcome {
            answer = outcome
        } else {
            answer = .failure(Cluster.noLease)
        }
        replyIsDurable = false
        if holding { commandsRunning -= 1 }
        var step = Step.next
        var failed: String?
        switch consume answer {
        case .result(let result):
            if !answeredEarly { reply(to: connection, .reply(re: request.id, result: .success(result)), recorded: command) }
        case .encoded(let result):
            if !closed, !answeredEarly {
                if let recording, recording.isOn, let command, command.isRecorded {
                    recording.keep(.encodedReply(re: request.id, result), size: SessionRecording.overhead + result.count)
                }
                connections[connection]?.send(reply: request.id, result: result)
            }
        case .failure(let error):
            failed = error.code.rawValue
            if !answeredEarly { reply(to: connection, .reply(re: request.id, result: .failure(error)), recorded: command) }
        case .replied(let target):
            if timeline != nil {
                note(
                    .command(
                        name: request.name, arguments: SessionTimeline.shown(request.arguments, of: command), connection: connection,
                        failed: target == nil ? "refused" : nil), at: started.at, duration: .now - started.at, rev: started.rev)
            }
            // A refusal was counted as it was answered (``reject(re:_:to:command:)``).
            guard let target else { return .next }
            if target !== self {
                step = .moved(target)
                logger.debug("attached", metadata: ["to": "\(target.id)"])
            }
            application.metrics?.sessionsAttached.increment()
        }
        let ended = Moment.now
        let elapsed = ended - started.at
        // `wait`'s time is the one its client asked for, a wrong `inspector` guess's
        // the delay it is made to wait; only a declared name is logged (what a
        // client typed may hold anything).
        let delayed = failed != nil && command?.awaiting == .delayingFailures
        if elapsed >= application.slowLog.threshold, command?.awaiting != .waiting, !delayed {
            application.slowLog.record(session: id, command: command == nil ? "unknown" : request.name, duration: elapsed)
        }
        application.metrics?.command(request.name, at: request.command, failed: failed, duration: delayed ? nil : elapsed)
        if command?.moves != true {
            timeline?.recordCommand(
                request.name, arguments: request.arguments, of: command, connection: connection, failed: failed, rev: started.rev,
                causedEvents: rev != started.rev, from: started.at, to: ended)
        }
        if holding {
            let events = held.end(connection)
            if !events.isEmpty, !closed, !answeredEarly, let output = connections[connection] {
                for line in events { output.send(line: line) }
            }
        }
        // Only an acknowledged `quit` ends the connection (one whose record could not
        // be deleted answered `unavailable`, and the session goes on), and the session
        // with it, on every connection.
        if command?.awaiting == .ending, failed == nil, !closed {
            application.sessions.remove(self)
            if !answeredEarly { connections[connection]?.send(.bye(.quit)) }
            close(.ended, except: answeredEarly ? nil : connection)
            step = .endConnection
        }
        return step
    }

    /// Replies a failure for a line that never became a command (bad JSON, too long...).
    package func reject(re: JSON, _ error: ProtocolError, to connection: Int = 0, command: String = "unknown") {
        application.metrics?.command(command, failed: error.code.rawValue, duration: nil)
        reply(to: connection, .reply(re: re, result: .failure(error)))
    }

    /// What the client is told of a command's error: its own code, or `internal_error`
    /// with a generic message while the error itself goes to the log (with the session
    /// and the command), never to the client.
    private func protocolError(_ error: any Error, running name: String) -> ProtocolError {
        switch error {
        case let error as ProtocolError:
            if let underlying = error.underlying {
                logger.debug("a command failed", metadata: ["command": "\(name)", "code": "\(error.code.rawValue)", "error": "\(underlying)"])
            }
            return error
        case let error as any ProtocolErrorConvertible:
            var converted = error.protocolError
            if converted.underlying == nil { converted.underlying = error }
            logger.debug("a command failed", metadata: ["command": "\(name)", "code": "\(converted.code.rawValue)", "error": "\(error)"])
            return converted
        default:
            logger.error(
                "a command failed unexpectedly",
                metadata: [
                    "command": "\(name)", "error": "\(String(reflecting: error))",
                ])
            return ProtocolError(.internalError, "\(name) failed unexpectedly; the server's log has the details")
        }
    }

    /// A command about to run, at debug level: in a cluster with the record it is
    /// served for (a token's lookup part, never its secret), from which `./dev chaos`
    /// checks that one node serves a session at a time. Only a command that runs
    /// here is logged as served (one refused for want of a lease was not).
    private func log(_ request: Request) {
        var metadata: Logger.Metadata = ["session": "\(id)", "cmd": "\(request.name)"]
        if application.cluster != nil { metadata["record"] = "\(SessionRegistry.split(token).lookup)" }
        application.logger.debug("command", metadata: metadata)
    }
}
