import Foundation

#if canImport(Glibc)
    import Glibc
#endif

/// A listening TCP socket on a free loopback port, for the fake servers the client's
/// tests script byte by byte: its descriptor and its port.
func loopbackListener(backlog: Int32 = 16) -> (descriptor: Int32, port: Int) {
    let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    var address = sockaddr_in()
    address.sin_family = sa_family_t(AF_INET)
    address.sin_addr.s_addr = inet_addr("127.0.0.1")
    var length = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(listener, $0, length) } }
    _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(listener, $0, &length) } }
    listen(listener, backlog)
    return (listener, Int(UInt16(bigEndian: address.sin_port)))
}
