import Foundation
import NIOCore
import NIOEmbedded
import ViewlineFraming
import ViewlineProtocol

/// The whole input path of a line, as the server runs it: framing
/// (`LineFrameHandler`, fed in two chunks), then request decoding (UTF-8, the
/// inline tokenizer or the JSON parser) and argument checking against a declaration
/// of each shape commands take (``commands``); then both framers with the
/// connection's input budget checked after every read (``FramerCheck``); and the
/// PROXY protocol header a trusted proxy sends first (``ProxyHeader``). Nothing
/// here may crash, whatever the bytes.
enum FuzzLines {
    /// A command of each shape commands take (``CommandSpec/everyShape``): the fuzzer
    /// builds from the framing and protocol modules alone, so its sanitizers
    /// instrument a fraction of the server's code, in a fraction of the time.
    static let commands = CommandTable(CommandSpec.everyShape)

    static func run(_ bytes: [UInt8]) {
        let channel = EmbeddedChannel(handler: LineFrameHandler(maximumLength: 512))
        let split = bytes.isEmpty ? 0 : Int(bytes[0]) % (bytes.count + 1)
        for chunk in [bytes[..<split], bytes[split...]] where !chunk.isEmpty {
            _ = try? channel.writeInbound(ByteBuffer(bytes: chunk))
            while let frame = try? channel.readInbound(as: LineFrame.self) {
                if case .line(let buffer) = frame {
                    _ = RequestDecoder.decode(line: buffer.readableBytesView, commands: commands)
                }
            }
        }
        // The client ends its input: the last line without a newline counts.
        channel.pipeline.fireUserInboundEventTriggered(ChannelEvent.inputClosed)
        while let frame = try? channel.readInbound(as: LineFrame.self) {
            if case .line(let buffer) = frame { _ = RequestDecoder.decode(line: buffer.readableBytesView, commands: commands) }
        }
        _ = try? channel.finish()
        // The whole input as one line, too: long JSON and deep nesting.
        if let decoded = RequestDecoder.decode(line: bytes, commands: commands), case .success(let request) = decoded {
            _ = request.arguments.json.keys
        }
        // Both framers (TCP lines, WebSocket) with their input budget: bytes held stay
        // within the bound after every read.
        FramerCheck.run(bytes)
        // A trusted proxy's PROXY protocol header: whatever it reads, a header it
        // accepts is no longer than the bytes and than the most a connection holds.
        if case .header(_, let length) = ProxyHeader.parse(ByteBuffer(bytes: bytes)) {
            precondition(length <= bytes.count && length <= ProxyHeader.maximumLength, "a header longer than its bytes")
        }
    }
}

#if FUZZING
    /// libFuzzer's driver (linked with `-sanitize=fuzzer`): runs `callback` on every input it generates.
    @_silgen_name("LLVMFuzzerRunDriver")
    func LLVMFuzzerRunDriver(
        _ argc: UnsafeMutablePointer<CInt>,
        _ argv: UnsafeMutablePointer<UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?>,
        _ callback: @convention(c) (UnsafePointer<UInt8>?, Int) -> CInt
    ) -> CInt

    /// libFuzzer's entry point, for when its own `main` is the one that runs.
    @_cdecl("LLVMFuzzerTestOneInput")
    public func fuzzOneInput(_ data: UnsafePointer<UInt8>?, _ size: Int) -> CInt {
        FuzzLines.run(data.map { Array(UnsafeBufferPointer(start: $0, count: size)) } ?? [])
        return 0
    }
#endif

/// Built with `-sanitize=fuzzer,address -DFUZZING` (`./dev fuzz`), hands the
/// command line to libFuzzer. Built normally, replays corpus files (or every file
/// in corpus folders), so a crash the fuzzer found stays a regression test.
@main
struct FuzzMain {
    static func main() throws {
        #if FUZZING
            var argc = CommandLine.argc
            var argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>? = CommandLine.unsafeArgv
            exit(LLVMFuzzerRunDriver(&argc, &argv) { data, size in fuzzOneInput(data, size) })
        #else
            var count = 0
            for path in CommandLine.arguments.dropFirst() {
                var isDirectory: ObjCBool = false
                guard FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory) else {
                    FileHandle.standardError.write(Data("viewline-fuzz: no such file: \(path)\n".utf8))
                    exit(2)
                }
                let files =
                    isDirectory.boolValue
                    ? try FileManager.default.contentsOfDirectory(atPath: path).sorted().map { "\(path)/\($0)" }
                    : [path]
                for file in files {
                    FuzzLines.run(Array(try Data(contentsOf: URL(fileURLWithPath: file))))
                    count += 1
                }
            }
            print("replayed \(count) inputs without a crash")
        #endif
    }
}
