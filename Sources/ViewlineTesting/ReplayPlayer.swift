import Foundation
import Synchronization
import ViewlineKit

/// What a ``Replay`` hands the replayed session: the recording it keeps (each step
/// told to the replay as it comes), each backend call's recorded answer once the
/// playback reaches it, the recorded clock readings in order, and sleeps that end
/// where the recorded ones did.
final class ReplayPlayer: SessionReplayer {
    /// Where a replayed step is compared: the `n`th message sent (an event or a
    /// reply, from 0), or the `n`th backend call (from 1). The rest (commands, clock
    /// readings, sleeps, answers) are what the replay gives, not what it checks.
    enum Place: Hashable {
        case output(Int)
        case call(Int)
        /// The `n`th call's answer, as the view-model took it.
        case answer(Int)
    }

    private struct State {
        /// What the replayed session sent and called so far, and who waits for which.
        var live: [Place: SessionRecording.Step] = [:]
        var outputs = 0
        var stepWaiters: [Place: CheckedContinuation<SessionRecording.Step?, Never>] = [:]
        /// Answers released, by call number, and the calls waiting for theirs.
        var answers: [Int: SessionRecording.Answer] = [:]
        var answerWaiters: [Int: CheckedContinuation<SessionRecording.Answer, Never>] = [:]
        /// Sleeps ended, by number, and the sleeps waiting.
        var woken: Set<Int> = []
        var sleepWaiters: [Int: CheckedContinuation<Bool, Never>] = [:]
        var sleeps = 0
        /// Calls the playback let through and no call took yet, and the calls waiting
        /// to be let through, first come first.
        var callPermits = 0
        var callsWaiting: [(id: Int, continuation: CheckedContinuation<Bool, Never>)] = []
        var nextWaiting = 0
        /// The recorded clock readings not yet served.
        var readings: ArraySlice<Double>
        /// Calls whose recorded answer could not be given back, and why.
        var unreplayable: [Int: String] = [:]
        var lastReading: Double?
        var made = false
    }

    private let state: Mutex<State>

    init(clockReadings: [Double]) {
        state = Mutex(State(readings: clockReadings[...]))
    }

    // MARK: - The session's side

    func recording() -> SessionRecording {
        state.withLock { $0.made = true }
        return SessionRecording(maximumBytes: .max) { [weak self] step in self?.kept(step) }
    }

    private func kept(_ step: SessionRecording.Step) {
        let place: Place
        switch step {
        case .event, .reply: place = .output(-1)
        case .call(let number, _, _): place = .call(number)
        case .answer(let number, _): place = .answer(number)
        default: return
        }
        let waiter: CheckedContinuation<SessionRecording.Step?, Never>? = state.withLock { state in
            var place = place
            if case .output = place {
                place = .output(state.outputs)
                state.outputs += 1
            }
            state.live[place] = step
            return state.stepWaiters.removeValue(forKey: place)
        }
        waiter?.resume(returning: step)
    }

    func mayCall(backend: String) async throws {
        let id = state.withLock { state in
            state.nextWaiting += 1
            return state.nextWaiting
        }
        let allowed = await parked { state in
            // A cancelled call takes no permit: it belongs to the recorded call.
            if Task.isCancelled { return false }
            guard state.callPermits > 0 else { return nil }
            state.callPermits -= 1
            return true
        } park: { state, continuation in
            state.callsWaiting.append((id, continuation))
        } unpark: { state in
            state.callsWaiting.firstIndex { $0.id == id }.map { state.callsWaiting.remove(at: $0).continuation }
        }
        if !allowed { throw CancellationError() }
    }

    /// Waits until `go` (under the lock) says go on, or is parked until someone
    /// resumes it, or its task is cancelled (`false`): `unpark` takes the parked
    /// continuation back out for the cancellation to resume.
    private func parked(
        _ go: @escaping (inout State) -> Bool?, park: @escaping (inout State, CheckedContinuation<Bool, Never>) -> Void,
        unpark: @escaping @Sendable (inout State) -> CheckedContinuation<Bool, Never>?
    ) async -> Bool {
        await withTaskCancellationHandler {
            await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now: Bool? = state.withLock { state in
                    if let now = go(&state) { return now }
                    if Task.isCancelled { return false }
                    park(&state, continuation)
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
        } onCancel: {
            state.withLock { unpark(&$0) }?.resume(returning: false)
        }
    }

    /// The playback reached a recorded call: the first call waiting goes on (or the
    /// next one to come).
    func letCallThrough() {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            if !state.callsWaiting.isEmpty { return state.callsWaiting.removeFirst().continuation }
            state.callPermits += 1
            return nil
        }
        waiter?.resume(returning: true)
    }

    func couldNotReplay(call number: Int, _ error: any Error) {
        state.withLock { $0.unreplayable[number] = "\(error)" }
    }

    /// Why call `number`'s recorded answer could not be given back, if it could not.
    func unreplayable(call number: Int) -> String? {
        state.withLock { $0.unreplayable[number] }
    }

    func answer(call number: Int, backend: String) async -> SessionRecording.Answer {
        await withCheckedContinuation { continuation in
            let answer: SessionRecording.Answer? = state.withLock { state in
                if let answer = state.answers.removeValue(forKey: number) { return answer }
                state.answerWaiters[number] = continuation
                return nil
            }
            if let answer { continuation.resume(returning: answer) }
        }
    }

    /// The clock: the next recorded reading (the last again once they are spent).
    var clock: any WallClock { ReplayClock(player: self) }

    fileprivate func nextReading() -> Date {
        let seconds: Double? = state.withLock { state in
            if let next = state.readings.popFirst() { state.lastReading = next }
            return state.lastReading
        }
        return seconds.map { Date(timeIntervalSince1970: $0) } ?? Date()
    }

    /// A sleep: ends when the playback reaches its recorded end, or at once when its
    /// task is cancelled (throwing, as a real sleep does).
    func sleep(_ duration: Duration) async throws {
        let number = state.withLock { state in
            state.sleeps += 1
            return state.sleeps
        }
        let woke = await parked { state in
            state.woken.remove(number) != nil ? true : nil
        } park: { state, continuation in
            state.sleepWaiters[number] = continuation
        } unpark: { state in
            state.sleepWaiters.removeValue(forKey: number)
        }
        if !woke { throw CancellationError() }
    }

    // MARK: - The playback's side

    /// The replayed session's step at `place`, waiting up to `timeout` for it; `nil`
    /// when none came.
    func liveStep(_ place: Place, timeout: Duration) async -> SessionRecording.Step? {
        // Bounded: the wait ends at `timeout`, and the timer with it.
        let timer = Task {
            try? await Task.sleep(for: timeout)
            self.state.withLock { $0.stepWaiters.removeValue(forKey: place) }?.resume(returning: nil)
        }
        defer { timer.cancel() }
        return await withCheckedContinuation { continuation in
            let step: SessionRecording.Step?? = state.withLock { state in
                if let step = state.live[place] { return .some(step) }
                state.stepWaiters[place] = continuation
                return .none
            }
            if let step { continuation.resume(returning: step) }
        }
    }

    /// The replayed session's step at `place` if it came, without waiting.
    func madeStep(_ place: Place) -> SessionRecording.Step? {
        state.withLock { $0.live[place] }
    }

    /// The recorded answer of call `number` is given now.
    func release(call number: Int, _ answer: SessionRecording.Answer) {
        let waiter: CheckedContinuation<SessionRecording.Answer, Never>? = state.withLock { state in
            if let waiter = state.answerWaiters.removeValue(forKey: number) { return waiter }
            state.answers[number] = answer
            return nil
        }
        waiter?.resume(returning: answer)
    }

    /// Sleep `number` runs out now.
    func wake(_ number: Int) {
        let waiter: CheckedContinuation<Bool, Never>? = state.withLock { state in
            if let waiter = state.sleepWaiters.removeValue(forKey: number) { return waiter }
            state.woken.insert(number)
            return nil
        }
        waiter?.resume(returning: true)
    }

    /// Ends every wait (the replay is over): calls get a cancellation, sleeps end.
    func finish() {
        let (answers, sleeps, steps, calls) = state.withLock { state in
            defer {
                state.callsWaiting = []
                state.answerWaiters = [:]
                state.sleepWaiters = [:]
                state.stepWaiters = [:]
            }
            return (
                Array(state.answerWaiters.values), Array(state.sleepWaiters.values), Array(state.stepWaiters.values),
                state.callsWaiting.map(\.continuation)
            )
        }
        for waiter in calls { waiter.resume(returning: false) }
        for waiter in answers { waiter.resume(returning: .failure(code: "cancelled", message: "the replay ended")) }
        for waiter in sleeps { waiter.resume(returning: false) }
        for waiter in steps { waiter.resume(returning: nil) }
    }
}

/// A replayed session's clock: the recorded readings, in order.
private struct ReplayClock: WallClock {
    let player: ReplayPlayer
    func now() -> Date { player.nextReading() }
}
