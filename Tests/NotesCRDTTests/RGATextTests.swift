import NotesCRDT
import PropertyBased
import Testing

/// The RGA body through the Notebook API, checked against a plain array of scalars.
struct RGATextTests {
    /// One replica's edit script, mirrored on a `[Unicode.Scalar]` model.
    struct ModelRun {
        var notebook: Notebook
        var note: NoteID
        var model: [Unicode.Scalar] = []
        var rng: SplitMix64
        var wall = baseTime
        /// How often a delete is a long one, across many runs (and often leaves), and how long.
        var longDeleteChance = 0.05
        var longDeleteMax = 400

        init(seed: UInt64, initialText: String = "") {
            rng = SplitMix64(seed: seed)
            notebook = makeNotebook(1)
            note = notebook.createNote(id: noteID(1), body: initialText).id
            model = scalars(initialText)
        }

        var body: RGAText { notebook.body(of: note)! }

        /// One random edit, applied to both the notebook and the model.
        mutating func step() throws {
            if rng.chance(0.05) { wall -= UInt64(rng.int(0 ... 1000)) } else { wall += UInt64(rng.int(0 ... 3)) }
            notebook.setWallTime(wall)
            let roll = rng.int(0 ..< 100)
            switch roll {
            case 0 ..< 40:  // insert anywhere, often in the middle of a run
                let at = rng.int(0 ... model.count)
                let text = randomText(rng.int(1 ... 8), using: &rng)
                try notebook.insertText(note, at: at, text)
                model.insert(contentsOf: scalars(text), at: at)
            case 40 ..< 55:  // type forward a few scalars, one at a time
                var at = rng.int(0 ... model.count)
                for _ in 0 ..< rng.int(1 ... 6) {
                    let text = randomText(1, using: &rng)
                    try notebook.insertText(note, at: at, text)
                    model.insert(contentsOf: scalars(text), at: at)
                    at += 1
                }
            case 55 ..< 90 where !model.isEmpty:  // delete, sometimes a long range across many runs and leaves
                let start = rng.int(0 ..< model.count)
                let maxLength = rng.chance(longDeleteChance) ? longDeleteMax : 6
                let end = min(model.count, start + rng.int(1 ... maxLength))
                try notebook.deleteText(note, start ..< end)
                model.removeSubrange(start ..< end)
            case 90 ..< 95:  // backspace at a random place
                if !model.isEmpty {
                    let at = rng.int(0 ..< model.count)
                    try notebook.deleteText(note, at ..< at + 1)
                    model.remove(at: at)
                }
            default:  // a whole-body replacement with a local change
                var new = model
                let at = rng.int(0 ... new.count)
                let cut = min(new.count - at, rng.int(0 ... 4))
                new.replaceSubrange(at ..< at + cut, with: scalars(randomText(rng.int(0 ... 4), using: &rng)))
                var view = String.UnicodeScalarView()
                view.append(contentsOf: new)
                try notebook.replaceBody(note, with: String(view))
                model = new
            }
        }

        /// Checks text, count and a sample of position/identity conversions against the model.
        func check(samples: Int = 8, sourceLocation: SourceLocation = #_sourceLocation) {
            let body = self.body
            #expect(body.count == model.count, sourceLocation: sourceLocation)
            #expect(Array(body.string.unicodeScalars) == model, sourceLocation: sourceLocation)
            var r = SplitMix64(seed: UInt64(model.count))
            for _ in 0 ..< (model.isEmpty ? 0 : samples) {
                let p = r.int(0 ..< model.count)
                #expect(body.position(of: body.identity(at: p)) == p, sourceLocation: sourceLocation)
            }
        }
    }

    @Test func emptyBody() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1)).id
        let body = try #require(nb.body(of: id))
        #expect(body.isEmpty)
        #expect(body.string == "")
        #expect(body.invariantViolation() == nil)
        #expect(try nb.insertText(id, at: 0, "") == nil)
        #expect(try nb.deleteText(id, 0 ..< 0) == nil)
        #expect(nb.body(of: noteID(2)) == nil)
    }

    @Test func outOfBoundsEditsThrowAndChangeNothing() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "abc").id
        let digest = nb.digest()
        var error = #expect(throws: CRDTError.self) { try nb.insertText(id, at: 4, "x") }
        #expect(error?.code == .outOfBounds)
        error = #expect(throws: CRDTError.self) { try nb.insertText(id, at: -1, "x") }
        #expect(error?.code == .outOfBounds)
        error = #expect(throws: CRDTError.self) { try nb.deleteText(id, 2 ..< 4) }
        #expect(error?.code == .outOfBounds)
        error = #expect(throws: CRDTError.self) { try nb.insertText(noteID(9), at: 0, "x") }
        #expect(error?.code == .notFound)
        #expect(nb.digest() == digest)
    }

    @Test func positionsAreUnicodeScalarOffsets() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "e\u{301}👍\u{1F3FD}日").id
        #expect(nb.body(of: id)!.count == 5)
        try nb.insertText(id, at: 1, "X")  // between the e and its combining accent
        try nb.insertText(id, at: 4, "Y")  // between the thumb and its skin tone
        #expect(nb.scalars(of: id) == scalars("eX\u{301}👍Y\u{1F3FD}日"))
        try nb.deleteText(id, 1 ..< 2)
        try nb.deleteText(id, 3 ..< 4)
        #expect(nb.note(id)!.body == "e\u{301}👍\u{1F3FD}日")
        #expect(nb.scalars(of: id) == scalars("e\u{301}👍\u{1F3FD}日"))
    }

    @Test func typingForwardIsOneRun() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1)).id
        for (i, s) in "hello world".unicodeScalars.enumerated() { try nb.insertText(id, at: i, String(s)) }
        #expect(nb.note(id)!.body == "hello world")
        #expect(nb.body(of: id)!.runCount == 1)
        // The keystrokes are coalesced into one insert in the log too.
        let inserts = nb.allChanges.flatMap(\.operations).filter { if case .insertText = $0 { true } else { false } }
        #expect(inserts == [.insertText(note: id, origin: nil, text: InsertedText("hello world"))])
    }

    @Test func identityAndPositionAgree() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "abcdef").id
        try nb.insertText(id, at: 3, "XY")  // abcXYdef
        try nb.deleteText(id, 1 ..< 2)  // acXYdef
        let body = nb.body(of: id)!
        for p in 0 ..< body.count { #expect(body.position(of: body.identity(at: p)) == p) }
        // The deleted b has an identity but no position.
        let b = OpID(replica: replica(1), seq: 5)  // seqs 1-3 are the fields, 4... the text
        #expect(body.contains(b))
        #expect(body.position(of: b) == nil)
        #expect(body.position(of: OpID(replica: replica(7), seq: 1)) == nil)
        #expect(!body.contains(OpID(replica: replica(1), seq: 999)))
        #expect(body.totalCharacters == 8)
        let ranges = body.identities(of: 0 ..< body.count)
        #expect(ranges.reduce(0) { $0 + $1.count } == 7)
    }

    /// Thousands of random edits on one replica, with the tree's invariants checked after every one.
    @Test(arguments: [1, 2] as [UInt64])
    func randomEditsMatchTheModel(seed: UInt64) throws {
        var run = ModelRun(seed: seed)
        run.longDeleteMax = 60
        for step in 0 ..< 500 {
            try run.step()
            let violation = run.body.invariantViolation()
            #expect(violation == nil, "seed \(seed), step \(step)")
            if violation != nil { return }
            #expect(run.body.count == run.model.count, "seed \(seed), step \(step)")
            if step % 10 == 0 { run.check() }
        }
        #expect(run.body.runCount > 64)  // more than one leaf holds
        run.check(samples: 200)
    }

    /// `spells` says whether the text is a string scalar for scalar, across many runs and leaves
    /// and every UTF-8 length, and says no to any string one scalar off (longer, shorter, or one
    /// changed) and to a canonically equivalent string with other scalars; `utf8` is the text's
    /// UTF-8.
    @Test func spellsIsScalarEqualityWithoutBuildingTheText() throws {
        var run = ModelRun(seed: 5)
        for step in 0 ..< 300 {
            try run.step()
            let text = String(String.UnicodeScalarView(run.model))
            #expect(run.body.spells(text), "step \(step)")
            #expect(run.body.utf8 == Array(text.utf8), "step \(step)")
            #expect(!run.body.spells(text + "x"), "step \(step)")
            #expect(!run.body.spells("🙂" + text), "step \(step)")
            guard !run.model.isEmpty else { continue }
            #expect(!run.body.spells(String(String.UnicodeScalarView(run.model.dropLast()))), "step \(step)")
            var changed = run.model
            changed[changed.count / 2] = changed[changed.count / 2] == "é" ? "e" : "é"
            #expect(!run.body.spells(String(String.UnicodeScalarView(changed))), "step \(step)")
        }
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "caf\u{E9} 日本 🙂").id
        #expect(nb.body(of: id)!.spells("café 日本 🙂"))
        #expect(!nb.body(of: id)!.spells("cafe\u{301} 日本 🙂"))  // == as Strings, not the same scalars
        #expect("cafe\u{301} 日本 🙂" == nb.body(of: id)!.string)
        let empty = nb.createNote(id: noteID(2)).id
        #expect(nb.body(of: empty)!.spells(""))
        #expect(!nb.body(of: empty)!.spells(" "))
    }

    /// A 24,000-scalar note cut into thousands of runs: far more than one leaf (64 runs) times one
    /// inner node (32 children) holds, so leaves and inner nodes split many times.
    @Test(arguments: [11] as [UInt64])
    func largeNoteSplitsLeavesAndInnerNodes(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        var run = ModelRun(seed: seed, initialText: randomText(24_000, using: &rng))
        run.longDeleteChance = 0.01
        #expect(run.body.runCount == 1)
        for step in 0 ..< 3_000 {
            try run.step()
            #expect(run.body.count == run.model.count, "seed \(seed), step \(step)")
            if step % 100 == 0 {
                let violation = run.body.invariantViolation()
                #expect(violation == nil, "seed \(seed), step \(step)")
                if violation != nil { return }
                run.check()
            }
        }
        #expect(run.model.count > 20_000)
        // More than 64 × 32 runs: more than 32 leaves, so the root inner node has split.
        #expect(run.body.runCount > RGATextTests.leafTimesInnerCapacity)
        #expect(run.body.invariantViolation() == nil)
        run.check(samples: 500)
    }

    static let leafTimesInnerCapacity = 64 * 32

    /// Many tiny notes edited in a random order stay independent.
    @Test func notesDoNotShareBodies() throws {
        var nb = makeNotebook(1)
        let a = nb.createNote(id: noteID(1), body: "alpha").id
        let b = nb.createNote(id: noteID(2), body: "beta").id
        try nb.insertText(a, at: 5, "!")
        try nb.deleteText(b, 0 ..< 1)
        #expect(nb.note(a)!.body == "alpha!")
        #expect(nb.note(b)!.body == "eta")
    }

    @Test func replaceBodyKeepsTheIdentitiesOfTheCommonPrefixAndSuffix() throws {
        var nb = makeNotebook(1)
        let id = nb.createNote(id: noteID(1), body: "Hello, world!").id
        let before = nb.body(of: id)!
        let h = before.identity(at: 0)
        let bang = before.identity(at: 12)
        let changes = try nb.replaceBody(id, with: "Hello, brave new world!")
        #expect(changes.count == 1)  // an insert only
        let after = nb.body(of: id)!
        #expect(after.position(of: h) == 0)
        #expect(after.position(of: bang) == 22)
        #expect(nb.note(id)!.body == "Hello, brave new world!")
        #expect(try nb.replaceBody(id, with: "Hello, brave new world!").isEmpty)
    }
}
