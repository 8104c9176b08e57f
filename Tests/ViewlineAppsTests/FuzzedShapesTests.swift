import Testing
import ViewlineApps
import ViewlineKit

/// `viewline-fuzz` decodes against ``CommandSpec/everyShape`` (it builds without the
/// server, so it cannot ask for the server's commands): every command the server
/// declares, built in or of the demo's view-models, has its arguments' shape there.
@Suite struct FuzzedShapesTests {
    @Test func everyCommandTheServerDeclaresHasAShapeTheFuzzerDecodes() {
        let fuzzed = Set(CommandSpec.everyShape.map(\.shape))
        let declared = Application(SeedApps.all).commands.all
        #expect(declared.count > 20)
        let missing = declared.filter { !fuzzed.contains($0.shape) }.map { "\($0.name): \($0.shape)" }
        #expect(missing.isEmpty, "add a command of these shapes to CommandSpec.everyShape: \(missing)")
    }
}
