#if canImport(Glibc)
    import Glibc
#endif

/// `SIGPIPE` ignored in the test process: a write to a peer that has gone (a server
/// that closed the connection, a child that exited before reading its input) fails
/// with `EPIPE` instead of ending every test at once.
///
/// NIO ignores the signal when it makes its first socket, so most tests never see it;
/// a test that writes through a raw socket or a pipe before any NIO socket exists in
/// the process did not have that cover. Every test-support type that starts a process
/// or opens a socket reads ``ignored`` first.
package enum BrokenPipes {
    /// Read it (`_ = BrokenPipes.ignored`) before the first write; the signal is
    /// ignored once, for the whole process.
    package static let ignored: Void = { _ = signal(SIGPIPE, SIG_IGN) }()
}
