import Foundation
import Testing

/// docs/grafana-dashboard.json charts the server's Prometheus metrics: every metric
/// its queries name must be one the server exports, so the dashboard cannot drift
/// from the metrics (as ArchitectureMapTests keeps the map).
@Suite struct GrafanaDashboardTests {
    static let dashboard = TutorialTests.root.appendingPathComponent("docs/grafana-dashboard.json")

    /// Every query of every panel.
    static func queries() throws -> [String] {
        let object = try JSONSerialization.jsonObject(with: Data(contentsOf: dashboard))
        var queries: [String] = []
        func walk(_ value: Any) {
            if let object = value as? [String: Any] {
                if let expression = object["expr"] as? String { queries.append(expression) }
                object.values.forEach(walk)
            } else if let array = value as? [Any] {
                array.forEach(walk)
            }
        }
        walk(object)
        return queries
    }

    @Test func everyMetricTheDashboardChartsIsOneTheServerExports() throws {
        let queries = try Self.queries()
        #expect(queries.count >= 20)
        var sources = ""
        let base = TutorialTests.root.appendingPathComponent("Sources")
        for case let url as URL in FileManager.default.enumerator(at: base, includingPropertiesForKeys: nil)! where url.pathExtension == "swift" {
            sources += try String(contentsOf: url, encoding: .utf8)
        }
        let pattern = try NSRegularExpression(pattern: "viewline_[a-z_]+")
        var names = Set<String>()
        for query in queries {
            for match in pattern.matches(in: query, range: NSRange(query.startIndex..., in: query)) {
                names.insert(String(query[Range(match.range, in: query)!]))
            }
        }
        #expect(names.count >= 15)
        for name in names.sorted() {
            // A histogram's series are its name with `_bucket`, `_sum` and `_count`.
            let metric = ["_bucket", "_sum", "_count"].reduce(name) { name, suffix in
                name.hasSuffix(suffix) && !sources.contains("\"\(name)") ? String(name.dropLast(suffix.count)) : name
            }
            #expect(sources.contains("\"\(metric)"), "docs/grafana-dashboard.json charts \(name): the server exports no \(metric)")
        }
    }
}
