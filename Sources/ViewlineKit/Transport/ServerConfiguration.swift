import Prometheus

/// How a ``ViewlineServer`` listens: address, limits, admin commands.
public struct ServerConfiguration: Sendable {
    /// The address to listen on.
    public var host = "127.0.0.1"
    /// 0 picks a free port (see ``ViewlineServer/localAddress``).
    public var port = 7878
    /// Enables admin commands (`fault`).
    public var admin = false
    /// A secret that opens the inspector on a server without ``admin``: the page at
    /// `/inspect` is served, sessions keep their timelines, and a connection that
    /// gives it (`inspector <token>`) may run the inspector's read-only commands
    /// (`inspect`, `info`), never the other admin commands. At least 16 characters
    /// (a random one: `openssl rand -hex 16`; a shorter one makes
    /// ``ViewlineServer/init(application:configuration:logger:)`` throw); `nil` for
    /// none (see ``inspectorTokenFromEnvironment``).
    public var inspectorToken: String?
    /// What plays a recorded session back (`ViewlineTesting`'s `Replay`): every session
    /// records into the recording it makes, and backend calls are answered by it.
    package var replayer: (any SessionReplayer)?
    /// Longest accepted line; longer ones get `line_too_long`.
    public var maximumLineBytes = 64 * 1024
    /// Most connections open at once; one more is told `bye` ("max clients
    /// reached") and closed. Lowered at start to what the file limit allows.
    public var maximumClients = 10_000
    /// Most connections open at once from one client address (0: no cap); one more
    /// is told `bye` ("max clients per address reached") and closed.
    public var maximumClientsPerAddress = 1_000
    /// Connections the kernel may complete before the server accepts them (the
    /// listen backlog of the TCP and web listeners; `--backlog`). After a failover or a
    /// restart every client of a node reconnects at once: a backlog smaller than that
    /// burst makes the kernel drop the rest, and each dropped client tries again a
    /// second later. 16,384 by default: room for a node's 10,000 clients at once.
    /// Linux caps it at `net.core.somaxconn` (4,096 on Debian 12): raise that on the
    /// host (`sysctl net.core.somaxconn=16384`) for the default to take effect.
    public var listenBacklog = 16_384
    /// A client that stops reading is cut off once this much output waits for it;
    /// its session lives on for it to attach again.
    public var maximumOutputBytes = 1 << 20
    /// What the output backlogs of one client address may hold together (0: no cap):
    /// past it, the connection whose backlog grows is cut off (its session lives on).
    /// Memory held is what is counted (buffer capacity, not bytes written).
    public var maximumOutputBytesPerAddress = 64 << 20
    /// What every connection's output backlog may hold together (0: no cap); past it,
    /// the connection whose backlog grows is cut off.
    public var maximumOutputBytesTotal = 512 << 20
    /// A connection whose line stays incomplete this long is closed (its session
    /// lives on); `nil` for no limit.
    public var incompleteLineTimeout: Duration? = .seconds(30)
    /// Session time to live, session count, event log size.
    public var sessions = SessionLimits()
    /// TLS for every listener but the operations one (the `ViewlineTLS` product's
    /// `TLS`); `nil` for plain TCP and HTTP.
    public var tls: (any TransportSecurity)?
    /// With a port (0 picks a free one), an HTTP listener on ``host`` serves the
    /// browser page at `/` and the protocol over WebSocket at `/ws` (one line per
    /// text message); with TLS configured, https and wss.
    public var webPort: Int?
    /// Origins besides the page's own whose pages may open the WebSocket (e.g.
    /// `https://app.example.com`); any other `Origin` gets 403.
    public var webOrigins: [String] = []
    /// Host names (besides IP addresses and `localhost`) the web listener answers to,
    /// e.g. `app.example.com`: a request whose `Host` is another name gets 421, so a
    /// page on a domain rebound to this address (DNS rebinding) reaches nothing.
    public var webHostNames: [String] = []
    /// Event loop threads (`--event-loops`); `nil`: one per core.
    public var eventLoops: Int?
    /// With a port (0 picks a free one), an HTTP listener on ``metricsHost`` serves
    /// `/metrics` (Prometheus), `/healthz` and `/readyz`, and the server records
    /// its ``ServerMetrics``; without one it records nothing.
    public var metricsPort: Int?
    /// The registry `/metrics` is written from: give the one swift-metrics was
    /// bootstrapped with (``ServerMetrics/factory(for:)``) to see libraries' figures
    /// too; a registry of the server's own otherwise.
    public var metricsRegistry: PrometheusCollectorRegistry?
    /// Where the operations listener binds: loopback unless said otherwise.
    public var metricsHost = "127.0.0.1"
    /// At shutdown, how long commands already running may take to finish (nothing
    /// new is accepted meanwhile) before every client is told `bye`.
    public var drainTimeout: Duration = .seconds(10)
    /// Commands at least this slow are kept in the slow log (`slowlog`).
    public var slowCommandThreshold: Duration = .milliseconds(100)
    /// The load balancers whose word on a client's address is taken (a PROXY protocol
    /// header on the line and web listeners, and `Forwarded`/`X-Forwarded-For` on the
    /// web listener): see ``TrustedProxies``. None by default.
    public var trustedProxies = TrustedProxies()
    /// Names the server in `welcome`.
    public var serverName = ViewlineRelease.serverName
    /// What this node says it runs in a cluster's directory (`info`'s and `inspect`'s
    /// nodes), for the operator of a rolling deploy: the app's own release
    /// (`shop 2.4.1`); `nil`, the default, says ``serverName``.
    public var release: String?
    /// Whether a server made with
    /// ``ViewlineServer/init(apps:services:faults:cluster:configuration:logger:)``
    /// and no ``inspectorToken`` takes the token from the file the environment
    /// variable `VIEWLINE_INSPECTOR_TOKEN_FILE` names (``InspectorTokenFile``), and
    /// refuses to start, naming the file, when it gives none. On by default, so any
    /// server built on ViewlineKit can be inspected with nothing added to its code;
    /// `false` keeps the inspector off whatever the environment says.
    public var inspectorTokenFromEnvironment = true

    /// The defaults above: loopback port 7878, no web or operations listener, no TLS.
    public init() {}
}
