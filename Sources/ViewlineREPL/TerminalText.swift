import ViewlineProtocol

/// Server text made safe for a terminal: every C0 control but newline and tab, DEL and
/// every C1 control becomes U+FFFD, so a place name or an alert from a hostile server
/// (or from another connection of a shared session) cannot set the window title, clear
/// the screen, move the cursor or write the clipboard (OSC 52).
enum TerminalText {
    /// `text` with its control characters replaced.
    static func clean(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isControl) else { return text }
        var cleaned = String.UnicodeScalarView()
        for scalar in text.unicodeScalars {
            cleaned.append(isControl(scalar) ? "\u{FFFD}" : scalar)
        }
        return String(cleaned)
    }

    static func isControl(_ scalar: Unicode.Scalar) -> Bool {
        switch scalar.value {
        case 0x0A, 0x09: false
        case 0x00...0x1F, 0x7F...0x9F: true
        default: false
        }
    }
}

extension JSON {
    /// This value as one JSON line safe for a terminal (`--raw`): the encoder escapes
    /// C0 controls and DEL already; a C1 control (U+0080–U+009F, U+009B is a CSI on many
    /// terminals) is written `\u00XX` too. Still the same JSON.
    var encodedForTerminal: String {
        let line = encoded
        guard line.unicodeScalars.contains(where: { (0x80...0x9F).contains($0.value) }) else { return line }
        var escaped = ""
        for scalar in line.unicodeScalars {
            if (0x80...0x9F).contains(scalar.value) {
                escaped += "\\u00" + String(scalar.value, radix: 16)
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    /// This value with every string in it (object keys included) made safe for a terminal.
    var cleanedForTerminal: JSON {
        switch self {
        case .string(let text): .string(TerminalText.clean(text))
        case .array(let values): .array(values.map(\.cleanedForTerminal))
        case .object(let object):
            .object(JSONObject(object.pairs.map { (TerminalText.clean($0.key), $0.value.cleanedForTerminal) }))
        case .null, .bool, .int, .double, .number: self
        }
    }
}
