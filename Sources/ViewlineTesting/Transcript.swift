import Foundation
import ViewlineKit

/// A session as a server recorded it (docs/transcripts.md): what `export <session>`
/// gives and the inspector page downloads, read back for a ``Replay``.
///
/// ```swift
/// let transcript = try Transcript(contentsOf: Bundle.module.url(forResource: "search", withExtension: "jsonl")!)
/// try await Replay(transcript, apps: [Search.self], services: services).run()
/// ```
public struct Transcript: Sendable {
    /// The header line: the format's version, the session, the server, its views,
    /// when recording began, and whether the recording was cut (`cut`).
    public let header: JSON
    /// The steps, in the order the session's executor took them.
    package let steps: [SessionRecording.Step]

    /// Whether the server stopped recording at its budget: a replay plays what was kept.
    public var wasCut: Bool { header["cut"]?.boolValue ?? false }
    /// How many steps the transcript holds.
    public var count: Int { steps.count }

    /// A transcript from its text: JSON lines, the header first.
    ///
    /// - Throws: ``TranscriptError`` naming the first line that is not one.
    public init(text: String) throws {
        var lines = text.split(separator: "\n", omittingEmptySubsequences: true).makeIterator()
        guard let first = lines.next(), let header = try? JSON.parse(String(first)), header["transcript"]?.intValue != nil else {
            throw TranscriptError(line: 1, reason: "the first line is not a transcript's header ({\"transcript\":1,…})")
        }
        guard header["transcript"]?.intValue == SessionRecording.transcriptVersion else {
            throw TranscriptError(line: 1, reason: "transcript version \(header["transcript"]?.encoded ?? "?") is not one this build reads (1)")
        }
        var steps: [SessionRecording.Step] = []
        var number = 1
        while let line = lines.next() {
            number += 1
            guard let json = try? JSON.parse(String(line)), let step = SessionRecording.Step(json: json) else {
                throw TranscriptError(line: number, reason: "not a transcript step: \(line.prefix(120))")
            }
            steps.append(step)
        }
        self.header = header
        self.steps = steps
    }

    /// A transcript from a file.
    public init(contentsOf url: URL) throws {
        try self.init(text: String(decoding: try Data(contentsOf: url), as: UTF8.self))
    }

    /// A transcript from `export`'s reply (its `transcript` string).
    public init(exportReply result: JSON) throws {
        guard let text = result["transcript"]?.stringValue else {
            throw TranscriptError(line: 0, reason: "the reply has no transcript")
        }
        try self.init(text: text)
    }

    /// The transcript's text: its header, then one line per step.
    public var text: String {
        var text = header.encoded + "\n"
        for step in steps { text += step.json.encoded + "\n" }
        return text
    }
}

/// A transcript that cannot be read: the line (1 is the header) and why.
public struct TranscriptError: Error, CustomStringConvertible {
    /// The line that is not a transcript's (1: the header; 0: no text at all).
    public let line: Int
    /// What is wrong with it.
    public let reason: String
    public var description: String { "transcript line \(line): \(reason)" }
}
