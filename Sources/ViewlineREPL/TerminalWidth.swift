#if canImport(Glibc)
    import Glibc
#endif

/// How many columns the terminal on standard output has right now.
public enum TerminalWidth {
    /// The width fallback when standard output is no terminal and `COLUMNS` is unset.
    public static let fallback = 80

    /// The terminal's width (asked again each time, so a resized window is followed);
    /// else `COLUMNS`; else 80.
    public static func current() -> Int {
        var size = winsize()
        if ioctl(1, UInt(TIOCGWINSZ), &size) == 0, size.ws_col > 0 { return Int(size.ws_col) }
        if let value = getenv("COLUMNS").flatMap({ Int(String(cString: $0)) }), value > 0 { return value }
        return fallback
    }
}
