import ViewlineKit

extension Session {
    /// Sends one line, inline or JSON, as a client would: parsed with the server's
    /// command table, rejected with the same error reply when it does not parse.
    @discardableResult
    package func send(_ line: String) async -> Outcome {
        switch RequestDecoder.decode(line: line, commands: application.commands) {
        case .success(let request)?: return await handle(request)
        case .failure(let failure)?:
            reject(re: failure.re, failure.error)
            return .keepOpen
        case nil: return .keepOpen
        }
    }
}
