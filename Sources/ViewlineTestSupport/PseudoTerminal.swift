import CPseudoTerminal
import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// Runs a program on a pseudo-terminal, as a person at a terminal would: the
/// program sees a TTY on its standard input and output.
public final class PseudoTerminal {
    public let process = Process()
    private let master: Int32
    private let masterHandle: FileHandle
    /// Everything the program printed so far.
    public private(set) var transcript = ""

    /// Starts `executable` on a new pseudo-terminal of `columns` × 40 characters.
    public init(executable: URL, arguments: [String], environment: [String: String], columns: Int = 120) throws {
        _ = BrokenPipes.ignored
        var name = [CChar](repeating: 0, count: 128)
        master = vl_open_pseudo_terminal(&name, name.count)
        guard master >= 0 else { throw LineClient.Failure(description: "no pseudo-terminal available") }
        let path = String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
        let slave = open(path, O_RDWR | O_NOCTTY)
        guard slave >= 0 else { throw LineClient.Failure(description: "cannot open \(path)") }
        var size = winsize(ws_row: 40, ws_col: UInt16(columns), ws_xpixel: 0, ws_ypixel: 0)
        _ = ioctl(slave, UInt(TIOCSWINSZ), &size)
        masterHandle = FileHandle(fileDescriptor: master, closeOnDealloc: true)
        let slaveHandle = FileHandle(fileDescriptor: slave, closeOnDealloc: true)
        process.executableURL = executable
        process.arguments = arguments
        process.environment = environment
        process.standardInput = slaveHandle
        process.standardOutput = slaveHandle
        process.standardError = slaveHandle
        try process.run()
    }

    deinit {
        // SIGKILL: a child spawned from a worker thread may inherit a mask that blocks SIGTERM.
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
        }
    }

    /// Types text (use `\r` for Enter, as a terminal sends).
    public func type(_ text: String) {
        let bytes = Array(text.utf8)
        _ = bytes.withUnsafeBytes { write(master, $0.baseAddress, $0.count) }
    }

    /// How much of the transcript earlier `expect` calls consumed.
    private var consumed = 0

    /// Reads output until `text` appears after what earlier calls consumed (as
    /// pexpect does). Returns the output from there up to and including `text`.
    @discardableResult
    public func expect(_ text: String, timeout: Duration = .seconds(10)) throws -> String {
        let deadline = ContinuousClock.now + timeout
        while true {
            let fresh = String(transcript.dropFirst(consumed))
            if let range = fresh.range(of: text) {
                let upTo = String(fresh[..<range.upperBound])
                consumed += upTo.count
                return upTo
            }
            guard ContinuousClock.now < deadline else { break }
            var pfd = pollfd(fd: master, events: Int16(POLLIN), revents: 0)
            guard poll(&pfd, 1, 50) > 0 else { continue }
            var chunk = [UInt8](repeating: 0, count: 4096)
            let n = chunk.withUnsafeMutableBytes { read(master, $0.baseAddress, $0.count) }
            if n <= 0 { break }
            transcript += String(decoding: chunk[..<n], as: UTF8.self)
        }
        throw LineClient.Failure(description: "did not see \(text.debugDescription); screen so far:\n\(transcript)")
    }
}
