import Foundation
import NIOCore

extension Application {
    /// `info`: the server's figures grouped like redis's INFO. The `commands` group
    /// counts commands by name and outcome when the server records metrics
    /// (`--metrics-port`), and is `null` otherwise.
    var info: JSON {
        let counts = sessions.counts
        let uptime = ContinuousClock.now - startedAt
        var server: JSONObject = [
            "name": .string(serverName), "uptimeSeconds": .int(Int(uptime.components.seconds)),
            "eventLoops": .int(eventLoopCount.load(ordering: .relaxed)),
        ]
        if let resident = ProcessFigures.residentBytes() { server["residentBytes"] = .int(resident) }
        if let files = ProcessFigures.openFiles() { server["openFiles"] = .int(files) }
        let byTransport = connections.byTransport
        let backlog = connections.outputBacklog
        let clients: JSONObject = [
            "connected": .int(byTransport.values.reduce(0, +)),
            "outputBacklog": ["connections": .int(backlog.connections), "bytes": .int(backlog.bytes)],
            "byTransport": .object(JSONObject(ServerMetrics.Transport.allCases.map { ($0.rawValue, .int(byTransport[$0] ?? 0)) })),
        ]
        let sessionsGroup: JSONObject = [
            "live": .int(counts.sessions), "attached": .int(counts.attached), "detached": .int(counts.sessions - counts.attached),
            "slowCommands": .int(slowLog.count),
        ]
        var commands: JSON = .null
        if let metrics {
            commands = .object(
                JSONObject(
                    metrics.commandCounts.sorted { $0.key < $1.key }.map { name, outcomes in
                        (name, .object(JSONObject(outcomes.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })))
                    }))
        }
        var latency: JSON = .null
        if let histogram = metrics?.latency {
            latency = [
                "bucketsSeconds": .array(histogram.boundsSeconds.map { .double($0) }), "cumulative": .array(histogram.cumulative.map { .int($0) }),
            ]
        }
        var clusterGroup: JSON = .null
        if let cluster {
            let live = cluster.liveNodes
            clusterGroup = [
                "node": .string(cluster.nodeID), "release": .string(cluster.node.release), "leaseValid": .bool(cluster.isServing()),
                "liveNodes": live.map { .int($0.count) } ?? .null,
                "nodes": live.map { nodes in
                    .array(
                        nodes.map {
                            [
                                "node": .string($0.id), "address": .string($0.address), "web": .string($0.web), "release": .string($0.release),
                                "records": .object(JSONObject($0.records.sorted { $0.key < $1.key }.map { ($0.key, .int($0.value)) })),
                            ]
                        })
                } ?? .null,
                "recordLagSeconds": .double(cluster.recordLag().seconds),
            ]
        }
        return [
            "server": .object(server), "clients": .object(clients), "sessions": .object(sessionsGroup),
            "commands": commands, "latency": latency, "cluster": clusterGroup,
        ]
    }
}
