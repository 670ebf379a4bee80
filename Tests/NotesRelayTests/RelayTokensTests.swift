@testable import NotesRelay
import NotesSync
import Testing

struct RelayTokensTests {
    @Test func decisions() throws {
        var tokens = RelayTokens()
        try tokens.add(assignment: "notes=abc123")
        try tokens.add(assignment: " team = def456 ")
        try tokens.add(space: "notes", token: "rotated-1")
        #expect(tokens.spaces == ["notes", "team"])
        #expect(tokens.authorize(token: "abc123", space: "notes") == .allowed)
        #expect(tokens.authorize(token: "rotated-1", space: "notes") == .allowed)
        #expect(tokens.authorize(token: "def456", space: "team") == .allowed)
        #expect(tokens.authorize(token: "def456", space: "notes") == .forbidden)
        #expect(tokens.authorize(token: "abc123", space: "unknown") == .forbidden)
        #expect(tokens.authorize(token: "abc12", space: "notes") == .unauthenticated)
        #expect(tokens.authorize(token: "abc1234", space: "notes") == .unauthenticated)
        #expect(tokens.authorize(token: nil, space: "notes") == .unauthenticated)
        #expect(tokens.authorize(token: "", space: "notes") == .unauthenticated)
    }

    @Test func tokensFile() throws {
        var tokens = RelayTokens()
        try tokens.add(file: "# relay tokens\n\nnotes=abc\n  team=def  \n", name: "tokens.txt")
        // Windows line ends read the same.
        var crlf = RelayTokens()
        try crlf.add(file: "# relay tokens\r\nnotes=abc\r\nteam=def\r\n", name: "tokens.txt")
        #expect(crlf.authorize(token: "def", space: "team") == tokens.authorize(token: "def", space: "team"))
        #expect(crlf.spaces == ["notes", "team"])
        #expect(tokens.spaces == ["notes", "team"])
        var bad = RelayTokens()
        do {
            try bad.add(file: "notes=abc\nthis line has no equals sign secret\n", name: "tokens.txt")
            Issue.record("a bad line was accepted")
        } catch let error as SyncError {
            #expect(error.message.hasPrefix("tokens.txt:2:"))
            #expect(!error.message.contains("secret"))
        }
        #expect(throws: SyncError.self) { try bad.add(assignment: "bad space=abc") }
        #expect(throws: SyncError.self) { try bad.add(assignment: "notes=") }
        #expect(throws: SyncError.self) { try bad.add(assignment: "=abc") }
    }

    @Test func bearerHeader() {
        #expect(RelayService.bearerToken("Bearer abc") == "abc")
        #expect(RelayService.bearerToken("bearer  abc ") == "abc")
        #expect(RelayService.bearerToken("Basic abc") == nil)
        #expect(RelayService.bearerToken("Bearer") == nil)
        #expect(RelayService.bearerToken(nil) == nil)
    }

    @Test func spaceNames() {
        #expect(RelayProtocol.isValidSpace("alice-notes_2.0"))
        #expect(!RelayProtocol.isValidSpace(""))
        #expect(!RelayProtocol.isValidSpace(".hidden"))
        #expect(!RelayProtocol.isValidSpace("a/b"))
        #expect(!RelayProtocol.isValidSpace(String(repeating: "a", count: 129)))
    }
}
