import ViewlineKit

/// Where two JSON values differ, key path by key path, as a failed expectation prints
/// it: only what changed, each path with the value expected (`−`) and the one
/// received (`+`), arrays by index, a long string cut to the part that differs:
///
/// ```
/// search state differs (− expected, + received):
///   − results[3].name: "Thai Palace"
///   + results[3].name: "Thai Place"
/// ```
struct JSONDifference {
    /// One differing path: its value on each side (`nil`: absent on that side).
    struct Change: Equatable {
        var path: String
        var expected: JSON?
        var actual: JSON?
    }

    /// Strings longer than this are cut around their first difference.
    static let longString = 60
    /// At most this many paths are listed; the rest are counted.
    static let shownChanges = 20

    /// Every path where `actual` differs from `expected`, in the expected value's key
    /// order (keys only `actual` has come after).
    static func changes(expected: JSON, actual: JSON, at path: String = "") -> [Change] {
        switch (expected, actual) {
        case (.object(let wanted), .object(let got)):
            var changes: [Change] = []
            for key in wanted.keys {
                let keyPath = path.isEmpty ? key : "\(path).\(key)"
                if let value = got[key] {
                    changes += Self.changes(expected: wanted[key]!, actual: value, at: keyPath)
                } else {
                    changes.append(Change(path: keyPath, expected: wanted[key], actual: nil))
                }
            }
            for key in got.keys where wanted[key] == nil {
                changes.append(Change(path: path.isEmpty ? key : "\(path).\(key)", expected: nil, actual: got[key]))
            }
            return changes
        case (.array(let wanted), .array(let got)):
            var changes: [Change] = []
            for index in 0..<max(wanted.count, got.count) {
                let itemPath = "\(path)[\(index)]"
                let left: JSON? = index < wanted.count ? wanted[index] : Optional.none
                let right: JSON? = index < got.count ? got[index] : Optional.none
                if let left, let right {
                    changes += Self.changes(expected: left, actual: right, at: itemPath)
                } else {
                    changes.append(Change(path: itemPath, expected: left, actual: right))
                }
            }
            return changes
        default:
            return expected == actual ? [] : [Change(path: path.isEmpty ? "(the value)" : path, expected: expected, actual: actual)]
        }
    }

    /// `title` and the changes, one `−` and one `+` line per path (a side that lacks
    /// the path says "(absent)"); "no difference" when there is none.
    /// `sides` names the two (a replay's are "recorded" and "replayed").
    static func report(_ title: String, expected: JSON, actual: JSON, sides: (String, String) = ("expected", "received")) -> String {
        let changes = changes(expected: expected, actual: actual)
        guard !changes.isEmpty else { return "\(title): no difference" }
        var lines = ["\(title) differs (− \(sides.0), + \(sides.1)):"]
        for change in changes.prefix(shownChanges) {
            let (left, right) = shown(change.expected, change.actual)
            lines.append("  − \(change.path): \(left)")
            lines.append("  + \(change.path): \(right)")
        }
        if changes.count > shownChanges { lines.append("  … and \(changes.count - shownChanges) more paths") }
        return lines.joined(separator: "\n")
    }

    /// The two values as printed: long strings cut to a window around where they
    /// first differ, with `…` where text was left out.
    static func shown(_ expected: JSON?, _ actual: JSON?) -> (String, String) {
        guard case .string(let left)? = expected, case .string(let right)? = actual,
            left.count > longString || right.count > longString
        else { return (expected?.encoded ?? "(absent)", actual?.encoded ?? "(absent)") }
        let common = zip(left, right).prefix { $0 == $1 }.count
        return (JSON.string(window(left, at: common)).encoded, JSON.string(window(right, at: common)).encoded)
    }

    /// About ``longString`` characters of `text`, from a little before `offset`.
    private static func window(_ text: String, at offset: Int) -> String {
        let start = max(0, offset - 20)
        let end = min(text.count, start + longString)
        let part = text.dropFirst(start).prefix(end - start)
        return (start > 0 ? "…" : "") + part + (end < text.count ? "…" : "")
    }
}
