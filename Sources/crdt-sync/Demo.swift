import ArgumentParser
import NotesCRDT

struct Demo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        abstract: "Show two devices editing one note while apart, then merging with nothing lost.",
        discussion: """
        A phone and a laptop share a note. While they are apart, both type into its body, the phone \
        renames it and the laptop pins it. Then they exchange changes both ways and end up with the \
        same note, every edit kept. Everything runs in memory; no database is touched.
        """
    )

    func run() async throws {
        var phone = Notebook(replicaID: ReplicaID(hex: "70a1e000000000000000000000000001")!)
        var laptop = Notebook(replicaID: ReplicaID(hex: "1a7e0000000000000000000000000002")!)
        let (id, _) = phone.createNote(title: "Groceries", body: "milk\neggs\n")
        try laptop.merge(phone)
        print("phone  \(phone.replicaID.description.prefix(8)) and laptop \(laptop.replicaID.description.prefix(8)) share note \(id.description.prefix(8)):")
        show(phone.note(id)!, indent: "  ")

        print("\nApart, offline:")
        try phone.insertText(id, at: phone.note(id)!.body.unicodeScalars.count, "bread\n")
        try phone.setTitle(id, "Groceries for Sunday")
        print("  phone  appends \"bread\" and renames the note to \"Groceries for Sunday\"")
        try laptop.insertText(id, at: 0, "coffee\n")
        try laptop.insertText(id, at: laptop.note(id)!.body.unicodeScalars.count, "apples\n")
        try laptop.setPinned(id, true)
        print("  laptop puts \"coffee\" first, appends \"apples\", and pins the note")

        let toLaptop = phone.changes(since: laptop.versionVector)
        let toPhone = laptop.changes(since: phone.versionVector)
        laptop.apply(contentsOf: toLaptop)
        phone.apply(contentsOf: toPhone)
        print("\nTogether again: the phone sends \(toLaptop.count) change(s), the laptop sends \(toPhone.count).")
        print("\nOn the phone:")
        show(phone.note(id)!, indent: "  ")
        print("On the laptop:")
        show(laptop.note(id)!, indent: "  ")
        let same = phone.digest() == laptop.digest()
        print(same ? "Identical on both (digest \(phone.digest().prefix(16))): nothing was lost."
                   : "The two sides differ: this is a bug.")
        if !same { throw ExitCode(1) }
    }

    private func show(_ note: Note, indent: String) {
        print("\(indent)title:  \(note.title)\(note.pinned ? "  [pinned]" : "")")
        print("\(indent)body:")
        for line in note.body.split(separator: "\n", omittingEmptySubsequences: false).dropLast() {
            print("\(indent)  | \(line)")
        }
    }
}
