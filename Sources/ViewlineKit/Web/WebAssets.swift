import NIOCore

/// The browser page's files (`Web/page/`), compiled into the binary: one HTML file,
/// one ES module, one style sheet; no build step, no external resource. Each body is
/// encoded once into a buffer every response shares (a write takes a reference, not a
/// copy), so a thousand pipelined requests for the script hold its bytes once.
enum WebAssets {
    struct Asset: Sendable {
        var body: ByteBuffer
        var contentType: String
        var cacheControl: String
    }

    /// The file served at `path`, or `nil` (404); the inspector's only on a server
    /// with admin commands (`inspector`).
    static func asset(at path: String, inspector: Bool) -> Asset? {
        switch path {
        case "/", "/index.html": page
        case "/app.js": script
        case "/app.css": style
        case "/inspect" where inspector, "/inspect.html" where inspector: inspectorPage
        case "/inspect.js" where inspector: inspectorScript
        default: modules[path]
        }
    }

    /// The page's modules, by path: app.js and inspect.js import them along the
    /// pages' seams. A new module is its file in Web/page (the manifest embeds every
    /// file there) and its line here.
    static let modules: [String: Asset] = [
        "/connection.js": module(PackageResources.connection_js),
        "/dialogs.js": module(PackageResources.dialogs_js),
        "/dom.js": module(PackageResources.dom_js),
        "/draw.js": module(PackageResources.draw_js),
        "/forms.js": module(PackageResources.forms_js),
        "/log.js": module(PackageResources.log_js),
        "/socket.js": module(PackageResources.socket_js),
    ]

    // The page revalidates every time (a new server version shows at once); the
    // script and style are small and revalidated too, never cached across versions.
    static let page = Asset(
        body: ByteBuffer(bytes: PackageResources.index_html), contentType: "text/html; charset=utf-8",
        cacheControl: "no-cache")
    static let script = Asset(
        body: ByteBuffer(bytes: PackageResources.app_js), contentType: "text/javascript; charset=utf-8",
        cacheControl: "no-cache")
    /// One of the page's modules (app.js imports them along the page's seams).
    private static func module(_ bytes: [UInt8]) -> Asset {
        Asset(body: ByteBuffer(bytes: bytes), contentType: "text/javascript; charset=utf-8", cacheControl: "no-cache")
    }
    static let inspectorPage = Asset(
        body: ByteBuffer(bytes: PackageResources.inspect_html), contentType: "text/html; charset=utf-8",
        cacheControl: "no-cache")
    static let inspectorScript = Asset(
        body: ByteBuffer(bytes: PackageResources.inspect_js), contentType: "text/javascript; charset=utf-8",
        cacheControl: "no-cache")
    static let style = Asset(
        body: ByteBuffer(bytes: PackageResources.app_css), contentType: "text/css; charset=utf-8",
        cacheControl: "no-cache")
}
