//! The store's schema and its migrations. `PRAGMA user_version` holds the schema version; each
//! migration moves it up by one inside a transaction. A store from a newer ksearch is refused.

/// The schema version this build writes.
pub const SCHEMA_VERSION: u32 = 2;

/// `MIGRATIONS[i]` moves a store from version `i` to `i + 1`.
pub(crate) const MIGRATIONS: &[&str] = &[
    // 0 → 1: the first schema. Records are JSON documents of the ksearch-core types; the
    // columns beside them exist for lookups and for people reading the file with sqlite3.
    "
    CREATE TABLE meta (
        key   TEXT PRIMARY KEY,
        value TEXT NOT NULL
    );
    CREATE TABLE nodes (
        id      INTEGER PRIMARY KEY,
        parent  INTEGER,
        title   TEXT NOT NULL,
        closed  INTEGER NOT NULL,
        data    TEXT NOT NULL
    );
    CREATE TABLE cycles (
        id      INTEGER PRIMARY KEY,
        node    INTEGER NOT NULL,
        data    TEXT NOT NULL
    );
    CREATE TABLE attempts (
        round       INTEGER PRIMARY KEY,
        node        INTEGER NOT NULL,
        cycle       INTEGER NOT NULL,
        status      TEXT,
        speedup     REAL,
        source_hash TEXT NOT NULL,
        data        TEXT NOT NULL
    );
    CREATE TABLE events (
        id     INTEGER PRIMARY KEY AUTOINCREMENT,
        round  INTEGER NOT NULL,
        kind   TEXT NOT NULL,
        data   TEXT NOT NULL
    );
    CREATE TABLE state (
        id    INTEGER PRIMARY KEY CHECK (id = 1),
        data  TEXT NOT NULL
    );
    ",
    // 1 → 2: the journal of model calls (LLM proposer), for cost accounting, resume and replay.
    "
    CREATE TABLE llm_calls (
        seq       INTEGER PRIMARY KEY AUTOINCREMENT,
        key       TEXT NOT NULL,
        round     INTEGER NOT NULL,
        role      TEXT NOT NULL,
        model     TEXT NOT NULL,
        purpose   TEXT NOT NULL,
        cost_usd  REAL,
        data      TEXT NOT NULL
    );
    CREATE INDEX llm_calls_key ON llm_calls (key);
    ",
];
