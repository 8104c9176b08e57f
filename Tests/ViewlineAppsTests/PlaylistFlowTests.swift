import Testing
import ViewlineApps
import ViewlineKit

/// The flowchart alone: no session, no backend.
@Suite struct PlaylistFlowTests {
    static func page(_ offset: Int, _ count: Int, total: Int) -> PlaylistPage {
        PlaylistPage(items: (offset..<offset + count).map { PlaylistItem(position: $0 + 1, title: "t", artist: "a") }, total: total)
    }

    @Test func withAValidTokenTheFirstPageIsFetched() throws {
        var flow = PlaylistFlow()
        #expect(try flow.start(tokenValid: true) == .fetchPage(offset: 0))
        #expect(flow.step == .fetching)
        flow.pageLoaded(offset: 0, Self.page(0, 10, total: 32))
        #expect(flow.step == .ready)
        #expect(flow.reserved == .fetchPage(offset: 10))
        #expect(flow.hasMore)
    }

    @Test func withoutATokenLoginComesFirstAndTheTaskWaits() throws {
        var flow = PlaylistFlow()
        #expect(try flow.start(tokenValid: false) == .askForLogin)
        #expect(flow.step == .awaitingLogin)
        #expect(flow.reserved == .fetchPage(offset: 0))
        #expect(flow.loginSucceeded() == .fetchPage(offset: 0))
    }

    @Test func aFailedLoginKeepsTheTaskForTheNextPlaylist() throws {
        var flow = PlaylistFlow()
        _ = try flow.start(tokenValid: true)
        flow.pageLoaded(offset: 0, Self.page(0, 10, total: 32))
        #expect(try flow.more(tokenValid: false) == .askForLogin)
        flow.loginFailed()
        #expect(flow.step == .loginFailed)
        // The next `playlist` resumes the held-back page instead of starting over.
        #expect(try flow.start(tokenValid: true) == .fetchPage(offset: 10))
        #expect(flow.items.count == 10)
    }

    @Test func cancellingTheLoginDropsTheTask() throws {
        var flow = PlaylistFlow()
        _ = try flow.start(tokenValid: false)
        flow.loginCancelled()
        #expect(flow.step == .cancelled)
        #expect(flow.reserved == nil)
        #expect(throws: ProtocolError.self) { try flow.more(tokenValid: true) }
    }

    @Test func pagesAppendWithoutDuplicatesUntilComplete() throws {
        var flow = PlaylistFlow()
        _ = try flow.start(tokenValid: true)
        flow.pageLoaded(offset: 0, Self.page(0, 10, total: 12))
        #expect(try flow.more(tokenValid: true) == .fetchPage(offset: 10))
        flow.pageLoaded(offset: 10, Self.page(8, 4, total: 12))  // overlaps: 9 and 10 again
        #expect(flow.items.map(\.position) == Array(1...12))
        #expect(flow.step == .complete)
        #expect(!flow.hasMore)
        do {
            _ = try flow.more(tokenValid: true)
            Issue.record("more after the last page must fail")
        } catch {
            #expect(error.code == .nothingPending)
        }
    }

    @Test func aFailedFetchKeepsTheStepReserved() throws {
        var flow = PlaylistFlow()
        _ = try flow.start(tokenValid: true)
        flow.pageFailed()
        #expect(flow.step == .failed)
        #expect(try flow.more(tokenValid: true) == .fetchPage(offset: 0))
    }
}
