#if canImport(Glibc)
    import Glibc
#elseif canImport(Darwin)
    import Darwin
#endif
import NIOCore
import NIOPosix

extension ServerBootstrap {
    /// TCP keepalive on every accepted connection: after ``keepAliveIdle`` seconds
    /// without a byte, the kernel probes every ``keepAliveInterval`` seconds and drops
    /// the connection after ``keepAliveProbes`` unanswered probes. A client that
    /// vanished without a FIN (a laptop closed, a NAT entry dropped) is detached within
    /// about two minutes, so its session can expire (PROTOCOL §8). TLS and WebSocket
    /// ride on the same socket and need nothing of their own.
    func keepingClientsAlive() -> ServerBootstrap {
        #if os(Linux)
            return
                self
                .childChannelOption(.socketOption(.so_keepalive), value: 1)
                .childChannelOption(
                    ChannelOptions.Types.SocketOption(level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPIDLE)),
                    value: SocketOptionValue(Self.keepAliveIdle)
                )
                .childChannelOption(
                    ChannelOptions.Types.SocketOption(level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPINTVL)),
                    value: SocketOptionValue(Self.keepAliveInterval)
                )
                .childChannelOption(
                    ChannelOptions.Types.SocketOption(level: SocketOptionLevel(IPPROTO_TCP), name: SocketOptionName(TCP_KEEPCNT)),
                    value: SocketOptionValue(Self.keepAliveProbes))
        #else
            return self.childChannelOption(.socketOption(.so_keepalive), value: 1)
        #endif
    }

    /// Seconds of silence before the first probe.
    static let keepAliveIdle = 60
    /// Seconds between probes.
    static let keepAliveInterval = 10
    /// Unanswered probes before the connection is dropped.
    static let keepAliveProbes = 6
}
