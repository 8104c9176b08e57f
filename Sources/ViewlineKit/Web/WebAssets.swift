/// The browser page's files (`Web/page/`), compiled into the binary: one HTML file,
/// one ES module, one style sheet; no build step, no external resource.
enum WebAssets {
    struct Asset {
        var body: String
        var contentType: String
        var cacheControl: String
    }

    /// The file served at `path`, or `nil` (404).
    static func asset(at path: String) -> Asset? {
        switch path {
        case "/", "/index.html": page
        case "/app.js": script
        case "/app.css": style
        default: nil
        }
    }

    // The page revalidates every time (a new server version shows at once); the
    // script and style are small and revalidated too, never cached across versions.
    static let page = Asset(
        body: String(decoding: PackageResources.index_html, as: UTF8.self), contentType: "text/html; charset=utf-8",
        cacheControl: "no-cache")
    static let script = Asset(
        body: String(decoding: PackageResources.app_js, as: UTF8.self), contentType: "text/javascript; charset=utf-8",
        cacheControl: "no-cache")
    static let style = Asset(
        body: String(decoding: PackageResources.app_css, as: UTF8.self), contentType: "text/css; charset=utf-8",
        cacheControl: "no-cache")
}
