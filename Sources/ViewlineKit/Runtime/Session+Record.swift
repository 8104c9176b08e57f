import Foundation

/// A session as a cluster record keeps it, and back: what lets another node take
/// over a session whose node died.
///
/// The record holds the session's id, its last `rev`, its user, every view's state
/// in its recorded form with that form's version (``StateRecord``) and the presented
/// alert. Restoring gives back the user, every recorded view (migrated to this
/// release's version), and an alert nobody was waiting on (an error's OK); running
/// work and an alert a flow was waiting on are not in it —
/// each view-model's ``ViewModel/restored(in:)`` starts again what must go on
/// (the drafts flow offers the pending draft again).
extension Session {
    /// The snapshot a cluster record stores, encoded: written straight into bytes, each
    /// view's state as the encoding it already has (shared with `display` lines and
    /// other sessions showing an equal state), not parsed into a tree and written out
    /// again (a contacts view of 4,000 entries is most of a record).
    package var record: String {
        var out: [UInt8] = []
        out.reserveCapacity(1024)
        func field(_ name: String, _ value: JSON) {
            out.append(UInt8(ascii: ","))
            JSON.string(name).write(into: &out)
            out.append(UInt8(ascii: ":"))
            value.write(into: &out)
        }
        out.append(contentsOf: #"{"id":"#.utf8)
        JSON.string(id).write(into: &out)
        field("rev", .int(rev))
        field("user", user.map(JSON.string) ?? .null)
        out.append(contentsOf: #","views":{"#.utf8)
        for index in application.views.indices {
            if index > 0 { out.append(UInt8(ascii: ",")) }
            let view = application.views[index]
            JSON.string(view.name).write(into: &out)
            out.append(UInt8(ascii: ":"))
            if let encodeRecord = view.encodeRecord {
                // A recorded form of its own; one that fails to encode is not recorded
                // (the restore finds `null`, which it cannot read, and says so).
                ((try? encodeRecord(states[index])) ?? .null).write(into: &out)
            } else {
                out.append(contentsOf: encodedState(index).bytes)
            }
        }
        out.append(UInt8(ascii: "}"))
        // The version of each recorded view's form (``StateRecord``).
        out.append(contentsOf: #","versions":{"#.utf8)
        var first = true
        for view in application.views {
            guard let version = view.recordVersion else { continue }
            if !first { out.append(UInt8(ascii: ",")) }
            first = false
            JSON.string(view.name).write(into: &out)
            out.append(UInt8(ascii: ":"))
            JSON.int(version).write(into: &out)
        }
        out.append(UInt8(ascii: "}"))
        var alert: JSON = .null
        // The alert as the wire shows it, and whether a flow was waiting on its answer.
        if let presented = presentedAlert,
            case .object(var object) = ServerMessage.alert(rev: rev, id: presented.id, content: presented.content).json
        {
            object["awaited"] = .bool(presented.continuation != nil)
            alert = .object(object)
        }
        field("alert", alert)
        field("nextAlert", .int(nextAlertNumber))
        field("displayed", .array(displayedViews.sorted().map { .string(application.views[$0].name) }))
        // The address that made the session: per-address limits count it there on any node.
        field("address", peer.map(JSON.string) ?? .null)
        out.append(UInt8(ascii: "}"))
        return String(decoding: out, as: UTF8.self)
    }

    /// What a record batch should do with this session now.
    enum RecordDecision {
        case closed
        /// Written less than a record interval ago: later.
        case notYet
        /// The snapshot to write, the rev it was taken at, and the token it goes with
        /// (read together, on the session's executor).
        case due(String, rev: Int, token: String)
    }

    /// The record to write with a new token (`end-others`): now, whatever the rate
    /// limit or its size, one rev above the session's own, so a batch that took this
    /// session's record with the old token before it (at most this rev) and lands after
    /// it changes nothing: a rev lower than the stored one is late. `nil` once closed.
    func recordForTokenChange() -> (snapshot: String, rev: Int)? {
        if closed { return nil }
        tokenRecordAttempt = recordRev + 1
        return (record, tokenRecordAttempt)
    }

    /// The rev a record of the session is written at: its own, or above a token record
    /// that may have committed unacknowledged (``tokenRecordFailed(at:)``).
    var recordRev: Int { max(rev, recordRevFloor) }

    /// `end-others`' record at `rev` was written: the session's next records are
    /// written at that rev at least (a lower one would be taken for late).
    func tokenRecorded(at rev: Int) {
        recordRevFloor = max(recordRevFloor, rev)
    }

    /// `end-others`' record at `rev` failed, or its reply was lost after it committed:
    /// the session keeps its token, and its next record is written above `rev`, so the
    /// database holds the token the session has again (a batch at a lower rev would
    /// change nothing).
    func tokenRecordFailed(at rev: Int) {
        recordRevFloor = max(recordRevFloor, rev + 1)
        application.cluster?.changed(self)
    }

    /// The record to write now, whatever its size, unless the session ended or it
    /// already had `burst` records written in the current `window`. A flow's few
    /// changes are written at once; a flood of events, `burst` times a window.
    func recordIfDue(now: ContinuousClock.Instant, window: Duration, burst: Int) -> RecordDecision {
        if closed { return .closed }
        // While `end-others` records a new token, no batch takes the session: it would
        // write the old token above the new one's rev.
        if tokenChangeInFlight { return .notYet }
        let sinceEpoch = now - Self.recordWindowEpoch
        if let start = recordWindowStart, sinceEpoch - start < window {
            guard recordsInWindow < burst else { return .notYet }
        } else {
            recordWindowStart = sinceEpoch
            recordsInWindow = 0
        }
        recordsInWindow += 1
        return .due(record, rev: recordRev, token: token)
    }

    /// A record's text read whole: the record, its views' states and the views it
    /// could not read (``readViews(_:application:)``). Text that is not a JSON object
    /// with a `views` object (a truncated or hand-edited row) is unreadable as a
    /// whole — refused, named ``wholeRecord`` — never a session at its initial states.
    static func readRecord(_ text: String, application: Application) -> (
        record: JSON, states: [Int: any Sendable], unreadable: [UnreadableRecord]
    ) {
        let parsed = Result { try JSON.parse(text) }
        guard case .success(let record) = parsed, case .object? = record["views"] else {
            let detail: String
            switch parsed {
            case .failure(let error): detail = "the record is not JSON: \(error)"
            case .success: detail = "the record holds no views"
            }
            let whole = UnreadableRecord(
                session: (try? parsed.get())?["id"]?.stringValue ?? "", view: wholeRecord, recordedVersion: 0, version: 0,
                reason: .decode(detail), refused: true)
            return (.null, [:], [whole])
        }
        let (states, unreadable) = readViews(record, application: application)
        return (record, states, unreadable)
    }

    /// The view an unreadable record names when the record itself cannot be read.
    static let wholeRecord = "(record)"

    /// The views' states a record holds, each read by its view's declaration
    /// (``ViewModel/record``) and migrated to this release's version, by view index;
    /// and the views whose record could not be read. A view not recorded, or missing
    /// from the record (added since), starts at its initial state and is neither.
    static func readViews(_ record: JSON, application: Application) -> (states: [Int: any Sendable], unreadable: [UnreadableRecord]) {
        var states: [Int: any Sendable] = [:]
        var unreadable: [UnreadableRecord] = []
        for index in application.views.indices {
            let view = application.views[index]
            guard let read = view.readRecord, let version = view.recordVersion, let saved = record["views"]?[view.name] else { continue }
            // A record from before versions were written holds version 1 of every view;
            // a version that is not a number is not guessed at.
            let written = record["versions"]?[view.name]
            guard let recorded = written == nil ? 1 : written?.intValue else {
                unreadable.append(
                    UnreadableRecord(
                        session: record["id"]?.stringValue ?? "", view: view.name, recordedVersion: 0, version: version,
                        reason: .decode("its version is not a number: \(written!.encoded)"), refused: view.whenUnreadable == .refuseAttach))
                continue
            }
            switch read(saved, recorded) {
            case .success(let state): states[index] = state
            case .failure(let reason):
                unreadable.append(
                    UnreadableRecord(
                        session: record["id"]?.stringValue ?? "", view: view.name, recordedVersion: recorded, version: version, reason: reason,
                        // A newer record is never read here, whatever the view allows:
                        // starting the view afresh would overwrite it (a rolling deploy's
                        // newer node, or the release rolled forward again, reads it).
                        refused: view.whenUnreadable == .refuseAttach || reason == .newer))
            }
        }
        return (states, unreadable)
    }

    /// Rebuilds a session from its record on this node, with the same token and the
    /// views' states ``readViews(_:application:)`` read. The revs go on from
    /// `claimedAt`, the record's rev as the claim raised it, so a client that attaches
    /// gets a snapshot with revs newer than anything it saw.
    static func restore(_ record: JSON, states: [Int: any Sendable], claimedAt: Int, token: String, application: Application) async -> Session {
        let session = Session(
            restoring: record["id"]?.stringValue ?? "s0", token: token, peer: record["address"]?.stringValue, application: application)
        await session.apply(record, states: states, claimedAt: claimedAt)
        return session
    }

    private func apply(_ record: JSON, states restoredStates: [Int: any Sendable], claimedAt: Int) async {
        // The new owner's revs start a whole lag above the recorded ones: the old owner
        // may have sent events after its last record, and its revs and the new owner's
        // never overlap, so any last-rev from the old owner gets a snapshot numbered
        // above it. The claim raised the record's rev by that lag, so a node that
        // restores the record after another one did (which died before writing one)
        // starts above that one's revs as well; a directory that does not raise it
        // still gets the lag over the snapshot's own rev. A record is trusted as far as
        // it is sane: never a rev that could overflow.
        let recorded = min(max(0, record["rev"]?.intValue ?? 0), Int.max / 4)
        rev = max(min(max(0, claimedAt), Int.max / 4), recorded + Self.maximumRecordLag)
        // Alert ids go on as far above the recorded ones as the revs do: the old
        // owner (and any owner since the record) may have shown alerts the record
        // never saw, and an answer meant for one of those must not name a new alert.
        let recordedAlert = min(max(1, record["nextAlert"]?.intValue ?? 1), Int.max / 4)
        nextAlertNumber = recordedAlert + (rev - recorded)
        user = record["user"]?.stringValue
        let displayed = Set((record["displayed"]?.arrayValue ?? []).compactMap(\.stringValue))
        for index in application.views.indices {
            if let state = restoredStates[index] { states[index] = state }
            if displayed.contains(application.views[index].name) { displayedViews.insert(index) }
        }
        if let alert = record["alert"], alert["awaited"] == false, let content = AlertContent(json: alert) {
            presentedAlert = PendingAlert(id: alert["id"]?.stringValue ?? "a\(nextAlertNumber)", content: content, continuation: nil)
        }
        for hook in application.restoredHooks { await hook(self) }
        restoredFromRecord = true
    }
}
