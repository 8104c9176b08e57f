import ArgumentParser
import Foundation
import ViewlineClient
import ViewlineREPL

#if canImport(Glibc)
    import Glibc
#endif

/// `viewline`: the REPL client. Interactive on a terminal, a script runner otherwise.
@main
struct ViewlineCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "viewline",
        abstract: "Talk to a viewline server: a line-editing REPL, or a script runner when standard input is not a terminal.",
        discussion: """
            At the prompt, y / n (or an action's label) answer the presented alert; Tab completes \
            command names; Ctrl-C clears the line; Ctrl-D quits. With a script on standard input \
            (`viewline < script.txt`) each command waits for its reply, events are printed, and \
            the exit status is non-zero if any command failed.
            """)

    @Option(help: "Server address.") var host = "127.0.0.1"
    @Option(help: "Server port.") var port = 7878
    @Flag(help: "Print the server's JSON lines unchanged.") var raw = false
    @Flag(help: "Connect over TLS (the server runs with --tls-cert).") var tls = false
    @Option(help: ArgumentHelp("PEM file of the certificate authority to trust (implies --tls; default: the system's).", valueName: "file")) var ca:
        String?
    @Option(help: ArgumentHelp("Join the session that owns this token (the REPL's `token` command shows it).", valueName: "token")) var attach:
        String?
    @Option(help: ArgumentHelp("Other nodes of a cluster, to reconnect to when this one goes away.", valueName: "host:port,…")) var nodes: String?
    @Option(help: ArgumentHelp("History file (default ~/.viewline_history).", valueName: "path")) var history: String?
    @Option(
        help: ArgumentHelp(
            "Print a Swift test written from a recorded session's transcript (export's, or the inspector's download), and exit.",
            valueName: "transcript.jsonl")) var testFrom: String?
    @Option(help: ArgumentHelp("The view-models the written test runs (with --test-from).", valueName: "Type,…")) var apps: String?

    /// The client's options: TLS, the cluster's other nodes, and no time limit a person
    /// at a prompt would hit (a command waits for its reply as long as the server works).
    var clientOptions: ViewlineClient.Options {
        var options = ViewlineClient.Options()
        options.tls = tls || ca != nil ? ViewlineClient.TLS(caFile: ca) : nil
        options.nodes = (nodes ?? "").split(separator: ",").compactMap { Endpoint(String($0)) }
        options.timeout = .seconds(3600)
        return options
    }

    func validate() throws {
        for node in (nodes ?? "").split(separator: ",") where Endpoint(String(node)) == nil {
            throw ValidationError("--nodes takes host:port addresses separated by commas, not \(node)")
        }
    }

    func run() throws {
        if let testFrom { return try writeTest(from: testFrom) }
        let endpoint = Endpoint.tcp(host: host, port: port)
        let bridge: ClientBridge
        do {
            bridge = try InteractiveREPL.connect(to: endpoint, options: clientOptions)
        } catch {
            let said = error is ConnectError ? "\(error)" : "cannot connect to \(endpoint): \(error)"
            FileHandle.standardError.write(Data("viewline: \(said)\n".utf8))
            throw ExitCode(1)
        }
        let colors = getenv("NO_COLOR").map { String(cString: $0).isEmpty } ?? true
        let interactive = isatty(0) == 1
        let style = TerminalStyle(colors: colors && isatty(1) == 1)
        var renderer = EventRenderer(style: style)
        renderer.width = TerminalWidth.current()
        let status: Int32
        if interactive {
            let home = getenv("HOME").map { String(cString: $0) }
            let path = history ?? home.map { "\($0)/.viewline_history" }
            status = InteractiveREPL(
                bridge: bridge, endpoint: endpoint, options: clientOptions, renderer: renderer, raw: raw, historyPath: path,
                attachToken: attach
            ).run()
        } else {
            var runner = ScriptRunner(bridge: bridge, renderer: renderer, raw: raw)
            status = runner.run()
        }
        if status != 0 { throw ExitCode(status) }
    }

    /// `--test-from`: the transcript written out as a Swift test, on standard output.
    func writeTest(from path: String) throws {
        guard let data = FileManager.default.contents(atPath: path) else {
            FileHandle.standardError.write(Data("viewline: cannot read \(path)\n".utf8))
            throw ExitCode(1)
        }
        let names = (apps ?? "").split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }.filter { !$0.isEmpty }
        do {
            print(try TranscriptTestWriter(apps: names).source(from: String(decoding: data, as: UTF8.self)), terminator: "")
        } catch {
            FileHandle.standardError.write(Data("viewline: \(path): \(error)\n".utf8))
            throw ExitCode(1)
        }
    }
}
