import Testing

@testable import ViewlineKit

/// The views a session displayed: what was inserted is contained and listed in
/// order, past the 64 held as bits too.
@Suite struct ViewIndexSetTests {
    @Test func anEmptySetHoldsNothing() {
        let views = ViewIndexSet()
        #expect(!views.contains(0))
        #expect(!views.contains(100))
        #expect(!views.contains(-1))
        #expect(views.sorted() == [])
    }

    @Test(arguments: [[0], [3, 1], [63, 0, 64], [200, 5, 70, 63, 5]])
    func whatWasInsertedIsContainedAndListedInOrder(_ inserted: [Int]) {
        var views = ViewIndexSet()
        for index in inserted { views.insert(index) }
        #expect(views.sorted() == Array(Set(inserted)).sorted())
        for index in 0..<256 { #expect(views.contains(index) == inserted.contains(index)) }
    }
}
