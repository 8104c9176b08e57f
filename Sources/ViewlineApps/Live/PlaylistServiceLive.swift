import ViewlineKit

/// The built-in playlist backend: alice has 32 items, bob 7, anyone else 12.
public struct PlaylistServiceLive: PlaylistService {
    let latency: Duration

    public init(latency: Duration) {
        self.latency = latency
    }

    public static func length(for user: String) -> Int {
        switch user {
        case "alice": 32
        case "bob": 7
        default: 12
        }
    }

    public func page(user: String, offset: Int, limit: Int) async throws -> PlaylistPage {
        if latency > .zero { try await Task.sleep(for: latency) }
        let total = Self.length(for: user)
        let start = min(max(offset, 0), total)
        let end = min(start + max(limit, 0), total)
        return PlaylistPage(items: (start..<end).map(Self.item), total: total)
    }

    private static let titles = [
        "Blue Monday", "Heroes", "Once in a Lifetime", "Hyperballad", "Teardrop", "Windowlicker", "Army of Me",
        "Pale Blue Eyes", "Girl from Ipanema", "So What", "Clair de Lune", "Paranoid Android", "Bizarre Love Triangle",
    ]
    private static let artists = [
        "New Order", "David Bowie", "Talking Heads", "Björk", "Massive Attack", "Aphex Twin", "The Velvet Underground",
        "Stan Getz", "Miles Davis", "Debussy", "Radiohead",
    ]

    static func item(_ index: Int) -> PlaylistItem {
        PlaylistItem(
            position: index + 1,
            title: titles[index % titles.count] + (index >= titles.count ? " (take \(index / titles.count + 1))" : ""),
            artist: artists[(index * 5) % artists.count])
    }
}
