import GRDB

/// The database schema, as GRDB migrations.
///
/// A migration that has landed is never edited: a change to the schema is a new migration appended
/// at the end. A database that has applied a migration this build does not know was written by a
/// newer crdt-sync, and is refused untouched.
enum Schema {
    /// Refuses a replica whose one-row tables hold a value of another SQL type than the code reads
    /// (SQLite keeps whatever it is given, and GRDB traps on a conversion it cannot make): a file
    /// made elsewhere and given as `--db`. Checked at every open; two rows, so it costs nothing.
    static func checkValueTypes(_ db: Database) throws {
        let wrong: [(table: String, condition: String)] = [
            ("replica", "typeof(replica_id) != 'blob' OR typeof(created_at) != 'integer' OR typeof(clock) != 'integer' OR typeof(revision) != 'integer' OR typeof(snapshot_generation) != 'integer' OR typeof(file_identity) NOT IN ('text', 'null') OR typeof(replica_state) NOT IN ('blob', 'null') OR typeof(tag_state) NOT IN ('blob', 'null') OR typeof(digests_complete) != 'integer'"),
            ("snapshot", "typeof(through_row) != 'integer' OR typeof(made_at) != 'integer' OR typeof(payload) != 'blob'"),
        ]
        for (table, condition) in wrong where try Bool.fetchOne(db, sql: "SELECT EXISTS (SELECT 1 FROM \(table) WHERE \(condition))") == true {
            throw StoreError(.corrupt, "the \(table) row holds a value of another type than its column's: the file was not written by crdt-sync, or was altered")
        }
    }

    /// `PRAGMA application_id` of a replica database: "CRDS".
    static let applicationID: Int32 = 0x4352_4453

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1-replica-log-notes-fts") { db in
            try db.execute(sql: """
                PRAGMA application_id = \(applicationID);

                -- The replica's identity and clock. One row.
                CREATE TABLE replica (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    replica_id BLOB NOT NULL,            -- 16 bytes
                    created_at INTEGER NOT NULL,         -- wall-clock ms
                    clock INTEGER NOT NULL DEFAULT 0,    -- last HLC timestamp issued or seen (packed)
                    revision INTEGER NOT NULL DEFAULT 0, -- +1 per write transaction (other processes notice)
                    snapshot_generation INTEGER NOT NULL DEFAULT 0 -- +1 per compaction
                );

                -- The op log: one row per stored change (ChangeCodec.encode([change])), in applied
                -- (causal) order. Rows covered by the snapshot are deleted when it is refreshed.
                CREATE TABLE changes (
                    row INTEGER PRIMARY KEY AUTOINCREMENT,
                    replica BLOB NOT NULL,
                    start_seq INTEGER NOT NULL,
                    end_seq INTEGER NOT NULL,
                    timestamp INTEGER NOT NULL,
                    local INTEGER NOT NULL,              -- 1: made on this replica
                    logged_at INTEGER NOT NULL,          -- wall-clock ms when written here
                    payload BLOB NOT NULL
                );

                -- Changes from elsewhere that wait for their dependencies.
                CREATE TABLE pending_changes (
                    row INTEGER PRIMARY KEY,
                    replica BLOB NOT NULL,
                    start_seq INTEGER NOT NULL,
                    end_seq INTEGER NOT NULL,
                    received_at INTEGER NOT NULL,
                    payload BLOB NOT NULL
                );

                -- Notebook.snapshot() of the state after log row `through_row`. One row at most.
                CREATE TABLE snapshot (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    through_row INTEGER NOT NULL,
                    made_at INTEGER NOT NULL,
                    payload BLOB NOT NULL
                );

                -- Materialized notes: plain columns for listing and sorting. Deleted notes have no row.
                CREATE TABLE notes (
                    id TEXT PRIMARY KEY,                 -- 32 lowercase hex digits
                    title TEXT NOT NULL,
                    pinned INTEGER NOT NULL,
                    archived INTEGER NOT NULL,
                    color TEXT,
                    state TEXT NOT NULL,                 -- active | trashed
                    tags TEXT NOT NULL,                  -- tag names, separated by U+001F
                    created_at INTEGER NOT NULL,         -- ms
                    updated_at INTEGER NOT NULL,         -- ms
                    body_length INTEGER NOT NULL,        -- Unicode scalars
                    preview TEXT NOT NULL                -- the body's first line, cut short
                ) WITHOUT ROWID;
                CREATE INDEX notes_listing ON notes (state, archived, pinned DESC, updated_at DESC);

                CREATE TABLE note_tags (
                    tag TEXT NOT NULL,                   -- Notebook.tagKey(name)
                    note TEXT NOT NULL,
                    PRIMARY KEY (tag, note)
                ) WITHOUT ROWID;
                CREATE INDEX note_tags_by_note ON note_tags (note);

                -- The searchable text of a note: its title (ord -1) and its body cut into chunks at
                -- content-defined boundaries (ord >= 0, in order), so that an edit re-indexes one chunk.
                CREATE TABLE note_text (
                    id INTEGER PRIMARY KEY,
                    note TEXT NOT NULL,
                    ord INTEGER NOT NULL,
                    title TEXT NOT NULL DEFAULT '',
                    body TEXT NOT NULL DEFAULT ''
                );
                CREATE UNIQUE INDEX note_text_order ON note_text (note, ord);

                CREATE VIRTUAL TABLE note_fts USING fts5(
                    title, body, content = 'note_text', content_rowid = 'id',
                    tokenize = 'unicode61 remove_diacritics 2', prefix = '2 3'
                );
                CREATE TRIGGER note_text_ai AFTER INSERT ON note_text BEGIN
                    INSERT INTO note_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
                END;
                CREATE TRIGGER note_text_ad AFTER DELETE ON note_text BEGIN
                    INSERT INTO note_fts (note_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
                END;
                CREATE TRIGGER note_text_au AFTER UPDATE ON note_text BEGIN
                    INSERT INTO note_fts (note_fts, rowid, title, body) VALUES ('delete', old.id, old.title, old.body);
                    INSERT INTO note_fts (rowid, title, body) VALUES (new.id, new.title, new.body);
                END;

                -- What each known peer has, and when it was last heard from.
                CREATE TABLE peers (
                    replica BLOB PRIMARY KEY,
                    version_vector BLOB NOT NULL,
                    last_seen INTEGER NOT NULL           -- wall-clock ms
                ) WITHOUT ROWID;
                """)
        }
        // NoteStore writes the index entries itself, after the rest of a transaction, so that one
        // transaction makes one FTS5 segment rather than one per statement (see Docs/Storage.md).
        migrator.registerMigration("v2-fts-written-by-the-store") { db in
            try db.execute(sql: """
                DROP TRIGGER note_text_ai;
                DROP TRIGGER note_text_ad;
                DROP TRIGGER note_text_au;
                """)
        }
        // The store brings the full-text index up to date when it is read, not in every write
        // transaction: a write records here what `note_fts` holds for each `note_text` row it
        // changed, and a search first re-indexes those rows (see `NoteStore.updateSearchIndex`).
        // A database from v2 has its index up to date, so the table starts empty.
        migrator.registerMigration("v3-fts-brought-up-to-date-before-reads") { db in
            try db.execute(sql: """
                -- The note_text rows whose full-text entries are stale: per row id, what note_fts
                -- holds for it, the title and body it was indexed with (indexed = 1) or nothing
                -- (indexed = 0). Written in the transaction that changes the row, only the first
                -- time after the index was last brought up to date.
                CREATE TABLE note_fts_stale (
                    row INTEGER PRIMARY KEY,
                    indexed INTEGER NOT NULL,
                    title TEXT NOT NULL DEFAULT '',
                    body TEXT NOT NULL DEFAULT ''
                );
                """)
        }
        // Changes that were causally ready but refer to something that does not exist (see
        // `Notebook.quarantinedChanges`): kept aside with the reason, written in the transaction
        // of the apply that quarantined them, deleted in the one where a valid change took their seqs.
        migrator.registerMigration("v4-quarantine") { db in
            try db.execute(sql: """
                CREATE TABLE quarantined_changes (
                    row INTEGER PRIMARY KEY,
                    replica BLOB NOT NULL,               -- 16 bytes: the change's author
                    start_seq INTEGER NOT NULL,
                    end_seq INTEGER NOT NULL,
                    reason_code TEXT NOT NULL,           -- CRDTError.Code, e.g. unknownReference
                    reason TEXT NOT NULL,                -- what is wrong, for people
                    received_at INTEGER NOT NULL,        -- wall-clock ms when it was quarantined
                    payload BLOB NOT NULL                -- ChangeCodec.encode([change])
                );
                """)
        }
        // Deleted notes are listed, named by id prefix and restored: their rows live in
        // `deleted_notes` (the `notes` table still has only notes a reader sees). Notes carry the
        // conflict mark, whether a concurrent edit brought them back from a delete, and when this
        // replica last saw them change (lists sort by it when a timestamp is far ahead; see
        // Docs/Storage.md). What the CRDT now works out of existing logs is written once at the
        // next open (`NoteStore.rematerializeIfAsked`): this records that it is due.
        migrator.registerMigration("v5-deleted-notes-conflicts-and-local-change-times") { db in
            try db.execute(sql: """
                ALTER TABLE notes ADD COLUMN conflicted INTEGER NOT NULL DEFAULT 0;   -- 1: merged with unresolved concurrent edits
                ALTER TABLE notes ADD COLUMN restored INTEGER NOT NULL DEFAULT 0;     -- 1: in the trash because an edit did not see its delete
                ALTER TABLE notes ADD COLUMN changed_here_at INTEGER NOT NULL DEFAULT 0; -- wall-clock ms when this replica last saw it change
                UPDATE notes SET changed_here_at = min(updated_at, CAST(strftime('%s', 'now') AS INTEGER) * 1000);
                DROP INDEX notes_listing;
                CREATE INDEX notes_listing ON notes (state, archived, pinned DESC, min(updated_at, changed_here_at + 60000) DESC);

                -- Tombstones: notes whose state is deleted, as far as a reader sees them.
                CREATE TABLE deleted_notes (
                    id TEXT PRIMARY KEY,                 -- 32 lowercase hex digits
                    title TEXT NOT NULL,
                    created_at INTEGER NOT NULL,         -- ms
                    updated_at INTEGER NOT NULL,         -- ms
                    deleted_at INTEGER NOT NULL,         -- ms of the winning delete
                    body_length INTEGER NOT NULL,        -- Unicode scalars
                    preview TEXT NOT NULL
                ) WITHOUT ROWID;

                -- Work the store must do at its next open, once (one row per reason).
                CREATE TABLE rematerialize (reason TEXT PRIMARY KEY);
                INSERT INTO rematerialize (reason) SELECT 'v5' FROM replica;
                """)
        }
        // Where the database file was when the replica got its identity, and the identities it
        // left: a copied or restored file moves to a fresh one before it writes (Architecture.md,
        // "Copied replicas").
        migrator.registerMigration("v6-file-identity-and-replica-history") { db in
            try db.execute(sql: """
                ALTER TABLE replica ADD COLUMN file_identity TEXT;  -- "device:inode", "memory:NAME"; NULL: not yet recorded
                CREATE TABLE replica_history (
                    row INTEGER PRIMARY KEY,
                    retired_id BLOB NOT NULL,            -- 16 bytes: the identity the replica stopped writing as
                    new_id BLOB NOT NULL,                -- 16 bytes: the one it writes as from then on
                    retired_at INTEGER NOT NULL,         -- wall-clock ms
                    reason TEXT NOT NULL
                );
                """)
        }
        // What a local edit of one note needs, kept per note and replica-wide, so that it runs
        // without loading every note and the whole log, and each note's part of the digest
        // (Docs/Storage.md, "Editing one note").
        migrator.registerMigration("v7-note-states-for-one-note-edits") { db in
            try db.execute(sql: """
                ALTER TABLE replica ADD COLUMN replica_state BLOB;  -- Notebook.encodedReplicaState() as of the last write; NULL: not yet written
                ALTER TABLE replica ADD COLUMN tag_state BLOB;      -- Notebook.encodedTagState() as of the last write; NULL: not yet written

                -- Notebook.encodedNoteState(note) as of the last write that changed the note; a
                -- write that changes a note without writing its state deletes its row.
                CREATE TABLE note_state (
                    note TEXT PRIMARY KEY,               -- 32 lowercase hex digits
                    payload BLOB NOT NULL
                );

                -- Notebook.noteDigest(note) of every note the replica knows (deleted ones too), so
                -- that the digest is read without loading them; NULL: not worked out yet (a long
                -- body being typed into). Complete once digests_complete is 1.
                CREATE TABLE note_digest (
                    note TEXT PRIMARY KEY,               -- 32 lowercase hex digits
                    digest BLOB
                ) WITHOUT ROWID;
                ALTER TABLE replica ADD COLUMN digests_complete INTEGER NOT NULL DEFAULT 0;
                """)
        }
        // Search finds substrings of scripts written without spaces (search 東京 in "東京で会議"):
        // the index is made again with a tokenizer that makes each of their characters a token
        // (`UnsegmentedScriptTokenizer`); Latin text is tokenized as before.
        migrator.registerMigration("v8-fts-unsegmented-scripts") { db in
            try db.execute(sql: """
                DROP TABLE note_fts;
                CREATE VIRTUAL TABLE note_fts USING fts5(
                    title, body, content = 'note_text', content_rowid = 'id',
                    tokenize = '\(UnsegmentedScriptTokenizer.name)', prefix = '2 3'
                );
                INSERT INTO note_fts (note_fts) VALUES ('rebuild');
                DELETE FROM note_fts_stale;
                """)
        }
        // The places `crdt-sync sync` syncs with when it is given none (Docs/CLI.md, "Remotes").
        migrator.registerMigration("v9-remotes") { db in
            try db.execute(sql: """
                CREATE TABLE remotes (
                    name TEXT PRIMARY KEY,
                    kind TEXT NOT NULL CHECK (kind IN ('folder', 'relay')),
                    location TEXT NOT NULL,              -- the folder's absolute path, or the relay's URL
                    space TEXT,                          -- the relay's space; NULL for a folder
                    token TEXT,                          -- the relay's bearer token; NULL for a folder
                    added_at INTEGER NOT NULL,           -- wall-clock ms
                    last_sync_at INTEGER,                -- wall-clock ms when the last sync ended
                    last_result TEXT,                    -- what it did, or its error, in a line
                    last_failed INTEGER NOT NULL DEFAULT 0
                ) WITHOUT ROWID;
                """)
        }
        // This device's undo stack (Docs/Storage.md, "Undo"): one row per local edit, so that
        // `undo` reverts what one command or one call made, whatever the log joined. Not replicated.
        migrator.registerMigration("v10-notes-history-undo-stack") { db in
            try db.execute(sql: """
                CREATE TABLE undo_stack (
                    row INTEGER PRIMARY KEY,
                    replica BLOB NOT NULL,               -- 16 bytes: the identity the edit was made as
                    start_seq INTEGER NOT NULL,          -- the edit's seqs
                    end_seq INTEGER NOT NULL,
                    undone_at INTEGER                    -- wall-clock ms of the undo; NULL: not undone
                );
                """)
        }
        // End-to-end encryption (issue 22): the space key and this replica's signing key, the
        // members' signing keys as first introduced, the sealed units kept to pass on as they
        // are, and the units refused (Docs/Storage.md, "Encrypted spaces").
        migrator.registerMigration("v11-e2e-space-key-members-sealed-units") { db in
            try db.execute(sql: """
                CREATE TABLE space_key (
                    id INTEGER PRIMARY KEY CHECK (id = 1),
                    key BLOB NOT NULL,                   -- 32 bytes: the space key
                    origin TEXT NOT NULL,                -- the scrypt descriptor, or 'recovery code'
                    signing_key BLOB NOT NULL,           -- 32 bytes: this replica's Ed25519 private key
                    created_at INTEGER NOT NULL          -- wall-clock ms
                );
                CREATE TABLE space_member (
                    replica BLOB PRIMARY KEY,            -- 16 bytes
                    public_key BLOB NOT NULL,            -- 32 bytes: the first key introduced for it (trusted on first use)
                    first_seen INTEGER NOT NULL          -- wall-clock ms
                ) WITHOUT ROWID;
                CREATE TABLE sealed_unit (
                    author BLOB NOT NULL,                -- 16 bytes
                    start_seq INTEGER NOT NULL,
                    end_seq INTEGER NOT NULL,
                    unit BLOB NOT NULL,                  -- the unit's bytes, as its author sealed them
                    PRIMARY KEY (author, end_seq)
                ) WITHOUT ROWID;
                CREATE TABLE sealed_refused (
                    row INTEGER PRIMARY KEY,
                    author BLOB NOT NULL,
                    start_seq INTEGER NOT NULL,
                    end_seq INTEGER NOT NULL,
                    code TEXT NOT NULL,                  -- a SyncError code: forged, malformed, tooLarge
                    reason TEXT NOT NULL,
                    unit BLOB NOT NULL,
                    received_at INTEGER NOT NULL
                );
                """)
        }
        // When each local edit was made (the log carries an earlier time for an insert that continues
        // the last one), and undos as rows of their own, so that versions are whole edits at their times.
        migrator.registerMigration("v12-history-fixes-undo-stack-times") { db in
            try db.execute(sql: """
                ALTER TABLE undo_stack ADD COLUMN made_at INTEGER;                    -- wall-clock ms; NULL: before this column
                ALTER TABLE undo_stack ADD COLUMN is_undo INTEGER NOT NULL DEFAULT 0; -- 1: an undo (a version, not undoable)
                """)
        }
        // Recipient tags (issue 22, the cost of opening): each member's X25519 agreement key, learnt
        // from a unit whose signature verified, and whether a kept unit's signature was checked
        // (a unit taken on its tag is checked before it is passed on).
        migrator.registerMigration("v13-crypto-cost-agreement-keys-signature-state") { db in
            try db.execute(sql: """
                ALTER TABLE space_member ADD COLUMN agreement_key BLOB;                      -- 32 bytes; NULL: not learnt yet
                ALTER TABLE sealed_unit ADD COLUMN signature INTEGER NOT NULL DEFAULT 1;    -- 1 verified, 0 taken on its tag, -1 does not verify
                """)
        }
        // Repairing an identity two copies wrote (Architecture.md, "Copied replicas"): the last
        // seq the replica made as each identity it left, and the re-issues it made and applied.
        migrator.registerMigration("v14-reissues") { db in
            try db.execute(sql: """
                ALTER TABLE replica_history ADD COLUMN made_through INTEGER;  -- the last seq made as retired_id; NULL: before this column
                CREATE TABLE reissues (
                    row INTEGER PRIMARY KEY,
                    replica BLOB NOT NULL,               -- 16 bytes: the identity a copy of whose database wrote the seqs
                    start_seq INTEGER NOT NULL,
                    count INTEGER NOT NULL,
                    by BLOB NOT NULL,                    -- 16 bytes: the identity that holds them again
                    first_seq INTEGER NOT NULL,          -- its seq of the first of them
                    own INTEGER NOT NULL,                -- 1: re-issued here
                    applied_at INTEGER NOT NULL,         -- wall-clock ms
                    UNIQUE (by, first_seq)
                );
                -- Per other side of a sync (a folder, a relay's space), how far it was found to
                -- hold each identity this replica wrote as, as the replica made it.
                CREATE TABLE remote_checks (
                    remote TEXT NOT NULL,                -- SyncTransport.checkKey
                    replica BLOB NOT NULL,               -- 16 bytes
                    seq INTEGER NOT NULL,
                    PRIMARY KEY (remote, replica)
                ) WITHOUT ROWID;
                """)
        }
        return migrator
    }
}
