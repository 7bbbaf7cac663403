use std::path::{Path, PathBuf};

use ksearch_core::record::{AttemptRecord, CycleRecord, LlmCallRecord};
use ksearch_core::task::Source;
use ksearch_core::tree::Node;
use rusqlite::{Connection, OpenFlags, OptionalExtension, params};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::error::StoreError;
use crate::finite::non_finite_path;
use crate::schema::{MIGRATIONS, SCHEMA_VERSION};
use crate::{StoreError as E, artifacts};

pub const DB_FILE: &str = "run.sqlite";
pub const ARTIFACTS_DIR: &str = "artifacts";
/// Held (`flock`, exclusive) by the one process writing the run: `run` or `resume`. The OS
/// releases it when that process ends, however it ends.
pub const LOCK_FILE: &str = "writer.lock";

/// An open run directory.
#[derive(Debug)]
pub struct RunStore {
    conn: Connection,
    dir: PathBuf,
    db: PathBuf,
    /// The writer's lock, held for the life of the store; `None` for a reader.
    _lock: Option<fs_err::File>,
}

/// Everything stored, as read back.
#[derive(Debug, Clone)]
pub struct Snapshot {
    pub nodes: Vec<Node>,
    pub cycles: Vec<CycleRecord>,
    pub attempts: Vec<AttemptRecord>,
    /// `(round, kind, JSON)` in the order written.
    pub events: Vec<(u64, String, serde_json::Value)>,
    /// Model calls in the order made.
    pub llm_calls: Vec<LlmCallRecord>,
}

/// `file:PATH?immutable=1`, the path escaped as a URI's.
fn immutable_uri(db: &Path) -> String {
    let mut uri = String::from("file:");
    for c in db.to_string_lossy().chars() {
        match c {
            '%' => uri.push_str("%25"),
            '?' => uri.push_str("%3f"),
            '#' => uri.push_str("%23"),
            c => uri.push(c),
        }
    }
    uri.push_str("?immutable=1");
    uri
}

/// Take the run directory's writer lock, or say who holds it. Creates `dir` if needed.
fn lock_writer(dir: &Path) -> Result<fs_err::File, StoreError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt as _;
    fs_err::create_dir_all(dir)?;
    let path = dir.join(LOCK_FILE);
    // The lock file is truncated and written below, and a run directory may come from
    // someone else: a link planted in its place (to any file of the user's) is refused, not
    // followed, and so is anything but a regular file (O_NONBLOCK: a named pipe does not wait).
    let refused = |what: &str| {
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!(
                "{} {what}; refusing to use it as the writer lock (remove it)",
                path.display()
            ),
        )
    };
    // std's open, for the OS error (ELOOP: a link); the file then names itself in errors.
    let file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(&path);
    let mut file = match file {
        Ok(file) => fs_err::File::from_parts(file, &path),
        Err(e) if e.raw_os_error() == Some(libc::ELOOP) => {
            return Err(refused("is a symbolic link").into());
        }
        Err(e) => {
            let text = format!("failed to open {}: {e}", path.display());
            return Err(std::io::Error::new(e.kind(), text).into());
        }
    };
    if !file.metadata()?.is_file() {
        return Err(refused("is not a regular file").into());
    }
    match file.try_lock() {
        Ok(()) => {}
        Err(std::fs::TryLockError::WouldBlock) => {
            let mut text = String::new();
            let _ = file.read_to_string(&mut text);
            return Err(E::Busy {
                dir: dir.to_owned(),
                holder: text.trim().parse().ok(),
            });
        }
        Err(std::fs::TryLockError::Error(e)) => {
            let text = format!("failed to lock {}: {e}", path.display());
            return Err(std::io::Error::new(e.kind(), text).into());
        }
    }
    // Who holds it, for the message another writer gets.
    file.set_len(0)?;
    file.rewind()?;
    write!(file, "{}", std::process::id())?;
    Ok(file)
}

/// Whether the store at `db` holds no record at all: a ksearch store whose tables are all
/// empty (or not created yet). Anything else, a file that is not a database included, is a
/// run or not ours, and is left alone.
fn never_recorded(db: &Path) -> bool {
    // Read-write: the caller holds the writer lock, and a hot journal left by a kill is rolled
    // back on open. Not through a link.
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
        | OpenFlags::SQLITE_OPEN_NO_MUTEX
        | OpenFlags::SQLITE_OPEN_NOFOLLOW;
    let empty = |conn: &Connection| -> Result<bool, rusqlite::Error> {
        let mut stmt = conn.prepare("SELECT name FROM sqlite_master WHERE type = 'table'")?;
        let tables: Vec<String> = stmt
            .query_map([], |r| r.get(0))?
            .collect::<Result<_, _>>()?;
        for t in tables {
            let sql = format!(
                "SELECT EXISTS (SELECT 1 FROM \"{}\")",
                t.replace('"', "\"\"")
            );
            if conn.query_row(&sql, [], |r| r.get::<_, bool>(0))? {
                return Ok(false);
            }
        }
        Ok(true)
    };
    Connection::open_with_flags(db, flags)
        .and_then(|conn| empty(&conn))
        .unwrap_or(false)
}

impl RunStore {
    /// Create a new run in `dir` (created if needed) and hold its writer lock. Fails if a run
    /// is already there or another process is writing it.
    pub fn create(dir: &Path) -> Result<Self, StoreError> {
        let lock = lock_writer(dir)?;
        let db = dir.join(DB_FILE);
        // `symlink_metadata`: a link there, even a dangling one, is something there.
        if fs_err::symlink_metadata(&db).is_ok() {
            if !never_recorded(&db) {
                return Err(E::Exists {
                    dir: dir.to_owned(),
                });
            }
            // A run killed as it started (its first records are one transaction, so its store
            // holds nothing): neither `resume` (no task) nor `run` (a store is there) would
            // take the directory, so it starts afresh. No live writer holds it: we do.
            for suffix in ["", "-wal", "-shm", "-journal"] {
                let mut name = db.clone().into_os_string();
                name.push(suffix);
                match fs_err::remove_file(&name) {
                    Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e.into()),
                    _ => {}
                }
            }
        }
        Self::connect(dir, db, Some(lock))
    }

    /// Open an existing run to read it, read-only: it writes nothing (not even a migration of
    /// an older store, which it reads as it is), so it works on a run in a read-only
    /// directory or an archive's copy. Takes no lock: a reader works while a run is going.
    pub fn open(dir: &Path) -> Result<Self, StoreError> {
        let db = Self::existing(dir)?;
        let sql = |source| E::Sqlite {
            path: db.clone(),
            source,
        };
        let flags = OpenFlags::SQLITE_OPEN_READ_ONLY
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let readable = |conn: Connection| -> Result<Connection, rusqlite::Error> {
            conn.busy_timeout(std::time::Duration::from_secs(10))?;
            conn.pragma_query_value(None, "user_version", |r| r.get::<_, u32>(0))?;
            Ok(conn)
        };
        // A WAL store needs its -shm and -wal files, which a read-only directory cannot get
        // once the writer has closed cleanly (it removes them); no process writes such a run,
        // so it is read as immutable.
        let conn = match Connection::open_with_flags(&db, flags).and_then(readable) {
            Ok(conn) => conn,
            Err(first) => Connection::open_with_flags(immutable_uri(&db), flags)
                .and_then(readable)
                .map_err(|_| sql(first))?,
        };
        let store = Self {
            conn,
            dir: dir.to_owned(),
            db,
            _lock: None,
        };
        let found = store.schema_version()?;
        if found > SCHEMA_VERSION {
            return Err(E::TooNew {
                path: store.db.clone(),
                found,
                supported: SCHEMA_VERSION,
            });
        }
        Ok(store)
    }

    /// Open an existing run to continue it, holding its writer lock for the life of the store.
    /// Fails at once, saying so, when another process is writing it.
    pub fn open_writer(dir: &Path) -> Result<Self, StoreError> {
        let db = Self::existing(dir)?;
        let lock = lock_writer(dir)?;
        Self::connect(dir, db, Some(lock))
    }

    /// Whether this store holds the run directory's writer lock.
    pub fn is_writer(&self) -> bool {
        self._lock.is_some()
    }

    /// The store's database file; a directory that cannot be looked into says so.
    fn existing(dir: &Path) -> Result<PathBuf, StoreError> {
        use fs_err::PathExt as _;
        let db = dir.join(DB_FILE);
        if db.fs_err_try_exists()? {
            Ok(db)
        } else {
            Err(E::Missing {
                dir: dir.to_owned(),
            })
        }
    }

    /// Ensures `artifacts/` exists (creates the run directory too), then opens the database.
    fn connect(dir: &Path, db: PathBuf, lock: Option<fs_err::File>) -> Result<Self, StoreError> {
        fs_err::create_dir_all(dir.join(ARTIFACTS_DIR))?;
        let sql = |source| E::Sqlite {
            path: db.clone(),
            source,
        };
        // Not through a link: the writer would migrate and write whatever database it points to.
        let conn = Connection::open_with_flags(
            &db,
            OpenFlags::default() | OpenFlags::SQLITE_OPEN_NOFOLLOW,
        )
        .map_err(sql)?;
        // WAL keeps readers (`ksearch tree` during a run) off the writer's back; NORMAL sync
        // is durable against the process being killed, which is what resume must survive.
        conn.pragma_update(None, "journal_mode", "WAL")
            .map_err(sql)?;
        conn.pragma_update(None, "synchronous", "NORMAL")
            .map_err(sql)?;
        conn.busy_timeout(std::time::Duration::from_secs(10))
            .map_err(sql)?;
        let mut store = Self {
            conn,
            dir: dir.to_owned(),
            db,
            _lock: lock,
        };
        store.migrate()?;
        Ok(store)
    }

    fn sql_err(&self) -> impl Fn(rusqlite::Error) -> StoreError + '_ {
        |source| E::Sqlite {
            path: self.db.clone(),
            source,
        }
    }

    pub fn schema_version(&self) -> Result<u32, StoreError> {
        self.conn
            .pragma_query_value(None, "user_version", |r| r.get(0))
            .map_err(self.sql_err())
    }

    /// Bring the schema up to date. Each step re-reads the version under a write lock, so two
    /// processes opening the same new store (a run starting, `ksearch tree` polling it) never
    /// apply a migration twice.
    fn migrate(&mut self) -> Result<(), StoreError> {
        let db = self.db.clone();
        let err = |source| E::Sqlite {
            path: db.clone(),
            source,
        };
        loop {
            let tx = self
                .conn
                .transaction_with_behavior(rusqlite::TransactionBehavior::Immediate)
                .map_err(err)?;
            let found: u32 = tx
                .pragma_query_value(None, "user_version", |r| r.get(0))
                .map_err(err)?;
            if found > SCHEMA_VERSION {
                return Err(E::TooNew {
                    path: self.db.clone(),
                    found,
                    supported: SCHEMA_VERSION,
                });
            }
            let Some(sql) = MIGRATIONS.get(found as usize) else {
                return Ok(());
            };
            tx.execute_batch(sql).map_err(err)?;
            tx.pragma_update(None, "user_version", found + 1)
                .map_err(err)?;
            tx.commit().map_err(err)?;
        }
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Store a source's text under its content hash; returns the hash.
    pub fn put_artifact(&self, source: &Source) -> Result<String, StoreError> {
        artifacts::put(&self.dir.join(ARTIFACTS_DIR), &source.text)
    }

    /// A stored source, verified against its hash: an artifact changed since it was written is
    /// refused ([`StoreError::TamperedArtifact`], naming the file and both hashes).
    pub fn read_artifact(&self, hash: &str, file: &str) -> Result<Source, StoreError> {
        let text = artifacts::get(&self.dir.join(ARTIFACTS_DIR), hash)?;
        Ok(Source {
            file: file.to_owned(),
            text,
        })
    }

    /// Run `f` in one transaction: all its writes land, or none do.
    pub fn transaction<T>(
        &mut self,
        f: impl FnOnce(&Tx<'_>) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        let db = self.db.clone();
        let err = |source| E::Sqlite {
            path: db.clone(),
            source,
        };
        let tx = self.conn.transaction().map_err(err)?;
        let out = f(&Tx {
            tx: &tx,
            db: &self.db,
        })?;
        tx.commit().map_err(err)?;
        Ok(out)
    }

    /// A record read back; an error names the record and the field that failed.
    fn decode<T: DeserializeOwned>(&self, what: &str, text: &str) -> Result<T, StoreError> {
        let corrupt = |at: String, source| E::Corrupt {
            path: self.db.clone(),
            what: what.to_owned(),
            at,
            source,
        };
        let mut de = serde_json::Deserializer::from_str(text);
        let value: T = serde_path_to_error::deserialize(&mut de)
            .map_err(|e| corrupt(e.path().to_string(), e.into_inner()))?;
        de.end().map_err(|e| corrupt(String::new(), e))?;
        Ok(value)
    }

    pub fn meta<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT value FROM meta WHERE key = ?1", [key], |r| r.get(0))
            .optional()
            .map_err(self.sql_err())?;
        text.map(|t| self.decode(&format!("meta `{key}`"), &t))
            .transpose()
    }

    pub fn state<T: DeserializeOwned>(&self) -> Result<Option<T>, StoreError> {
        let text: Option<String> = self
            .conn
            .query_row("SELECT data FROM state WHERE id = 1", [], |r| r.get(0))
            .optional()
            .map_err(self.sql_err())?;
        text.map(|t| self.decode("engine state", &t)).transpose()
    }

    fn column<T: DeserializeOwned>(&self, what: &str, sql: &str) -> Result<Vec<T>, StoreError> {
        let mut stmt = self.conn.prepare(sql).map_err(self.sql_err())?;
        let texts: Vec<String> = stmt
            .query_map([], |r| r.get(0))
            .map_err(self.sql_err())?
            .collect::<Result<_, _>>()
            .map_err(self.sql_err())?;
        texts.iter().map(|t| self.decode(what, t)).collect()
    }

    /// Read everything back.
    pub fn snapshot(&self) -> Result<Snapshot, StoreError> {
        let mut stmt = self
            .conn
            .prepare("SELECT round, kind, data FROM events ORDER BY id")
            .map_err(self.sql_err())?;
        let rows: Vec<(i64, String, String)> = stmt
            .query_map([], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)))
            .map_err(self.sql_err())?
            .collect::<Result<_, _>>()
            .map_err(self.sql_err())?;
        let events = rows
            .into_iter()
            .map(|(round, kind, data)| Ok((round as u64, kind, self.decode("event", &data)?)))
            .collect::<Result<_, StoreError>>()?;
        Ok(Snapshot {
            nodes: self.column("node", "SELECT data FROM nodes ORDER BY id")?,
            cycles: self.column("cycle", "SELECT data FROM cycles ORDER BY id")?,
            attempts: self.column("attempt", "SELECT data FROM attempts ORDER BY round")?,
            events,
            // Schema 2 added the journal of model calls; a reader leaves an older store as is.
            llm_calls: if self.schema_version()? >= 2 {
                self.column("model call", "SELECT data FROM llm_calls ORDER BY seq")?
            } else {
                Vec::new()
            },
        })
    }
}

/// Writes inside one transaction.
#[derive(Debug)]
pub struct Tx<'a> {
    tx: &'a rusqlite::Transaction<'a>,
    db: &'a Path,
}

impl Tx<'_> {
    /// A record as JSON. One holding NaN or an infinity is refused: JSON would write it as
    /// `null`, and the run could no longer be read.
    fn json<T: Serialize + ?Sized>(&self, what: &str, v: &T) -> Result<String, StoreError> {
        if let Some(at) = non_finite_path(v) {
            return Err(E::NonFinite {
                path: self.db.to_owned(),
                what: what.to_owned(),
                at,
            });
        }
        serde_json::to_string(v).map_err(|source| E::Corrupt {
            path: self.db.to_owned(),
            what: format!("{what} (while writing it)"),
            at: String::new(),
            source,
        })
    }

    fn run(&self, sql: &str, params: impl rusqlite::Params) -> Result<(), StoreError> {
        self.tx
            .execute(sql, params)
            .map(|_| ())
            .map_err(|source| E::Sqlite {
                path: self.db.to_owned(),
                source,
            })
    }

    pub fn set_meta<T: Serialize>(&self, key: &str, value: &T) -> Result<(), StoreError> {
        let data = self.json(&format!("meta `{key}`"), value)?;
        self.run(
            "INSERT OR REPLACE INTO meta (key, value) VALUES (?1, ?2)",
            params![key, data],
        )
    }

    pub fn set_state<T: Serialize>(&self, state: &T) -> Result<(), StoreError> {
        let data = self.json("engine state", state)?;
        self.run(
            "INSERT OR REPLACE INTO state (id, data) VALUES (1, ?1)",
            params![data],
        )
    }

    pub fn put_node(&self, n: &Node) -> Result<(), StoreError> {
        let data = self.json(&format!("node {}", n.id), n)?;
        self.run(
            "INSERT OR REPLACE INTO nodes (id, parent, title, closed, data) VALUES (?1, ?2, ?3, ?4, ?5)",
            params![n.id, n.parent, n.action.title, !n.is_open(), data],
        )
    }

    /// Make the stored nodes exactly `nodes` (the tree is small; rewriting it is simplest).
    pub fn replace_nodes<'n>(
        &self,
        nodes: impl IntoIterator<Item = &'n Node>,
    ) -> Result<(), StoreError> {
        self.run("DELETE FROM nodes", [])?;
        for n in nodes {
            self.put_node(n)?;
        }
        Ok(())
    }

    pub fn put_cycle(&self, c: &CycleRecord) -> Result<(), StoreError> {
        let data = self.json(&format!("cycle {}", c.id), c)?;
        self.run(
            "INSERT OR REPLACE INTO cycles (id, node, data) VALUES (?1, ?2, ?3)",
            params![c.id as i64, c.node, data],
        )
    }

    pub fn put_attempt(&self, a: &AttemptRecord) -> Result<(), StoreError> {
        let data = self.json(&format!("attempt (round {})", a.round), a)?;
        self.run(
            "INSERT OR REPLACE INTO attempts (round, node, cycle, status, speedup, source_hash, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![a.round as i64, a.node, a.cycle as i64, a.status().map(ksearch_core::protocol::Status::as_str), a.speedup(), a.source_hash, data],
        )
    }

    pub fn add_llm_call(&self, c: &LlmCallRecord) -> Result<(), StoreError> {
        let role = match c.role {
            ksearch_core::record::ModelRole::Reasoning => "reasoning",
            ksearch_core::record::ModelRole::Codegen => "codegen",
        };
        let data = self.json(&format!("model call ({}, round {})", c.purpose, c.round), c)?;
        self.run(
            "INSERT INTO llm_calls (key, round, role, model, purpose, cost_usd, data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7)",
            params![c.key, c.round as i64, role, c.model, c.purpose, c.cost_usd, data],
        )
    }

    pub fn add_event<T: Serialize>(
        &self,
        round: u64,
        kind: &str,
        data: &T,
    ) -> Result<(), StoreError> {
        let data = self.json(&format!("event `{kind}`"), data)?;
        self.run(
            "INSERT INTO events (round, kind, data) VALUES (?1, ?2, ?3)",
            params![round as i64, kind, data],
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ksearch_core::record::{AttemptKind, CycleOutcome};
    use ksearch_core::tree::{Gate, Solution, Tree};

    fn seed_solution() -> Solution {
        Solution {
            round: 0,
            source_hash: "x".into(),
            source_file: "seed.c".into(),
            speedup: Some(1.0),
            speedup_vs_parent: None,
            vs_parent_interval: None,
            gate: Gate::Unmeasured,
            latency_ms: [("small".to_owned(), 0.25)].into(),
            baseline_ms: [("small".to_owned(), 0.5)].into(),
        }
    }

    fn attempt(round: u64) -> AttemptRecord {
        AttemptRecord {
            round,
            node: 0,
            cycle: 1,
            kind: AttemptKind::Implement,
            source_hash: "h".into(),
            source_file: "c.c".into(),
            note: "n".into(),
            evaluation: None,
            improved: false,
            payload: serde_json::Value::Null,
        }
    }

    #[test]
    fn records_round_trip_through_the_store() {
        let dir = tempfile::tempdir().unwrap();
        let tree = Tree::new(vec!["root note".into()], seed_solution());
        let cycle = CycleRecord {
            id: 1,
            node: 0,
            started_round: 1,
            ended_round: Some(2),
            outcome: Some(CycleOutcome::Passed),
            best_round: Some(1),
            stagnation: 0,
            attempts: 2,
        };
        {
            let mut s = RunStore::create(dir.path()).unwrap();
            assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
            s.transaction(|tx| {
                tx.set_meta("task", &"cpu/softmax")?;
                tx.put_node(tree.root())?;
                tx.put_cycle(&cycle)?;
                tx.put_attempt(&attempt(1))?;
                tx.add_event(1, "edit", &serde_json::json!({"ops": 1}))?;
                tx.set_state(&42u32)
            })
            .unwrap();
        }
        let s = RunStore::open(dir.path()).unwrap();
        let snap = s.snapshot().unwrap();
        assert_eq!(snap.nodes, vec![tree.root().clone()]);
        assert_eq!(snap.cycles, vec![cycle]);
        assert_eq!(snap.attempts, vec![attempt(1)]);
        assert_eq!(snap.events[0].1, "edit");
        assert_eq!(
            s.meta::<String>("task").unwrap().as_deref(),
            Some("cpu/softmax")
        );
        assert_eq!(s.state::<u32>().unwrap(), Some(42));
    }

    #[test]
    fn a_failed_transaction_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RunStore::create(dir.path()).unwrap();
        let r: Result<(), _> = s.transaction(|tx| {
            tx.put_attempt(&attempt(1))?;
            Err(StoreError::MissingArtifact {
                hash: "boom".into(),
                dir: dir.path().to_owned(),
            })
        });
        assert!(r.is_err());
        assert!(s.snapshot().unwrap().attempts.is_empty());
    }

    #[test]
    fn create_refuses_an_existing_run_and_open_a_missing_one() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RunStore::create(dir.path()).unwrap();
        s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
            .unwrap();
        drop(s);
        let e = RunStore::create(dir.path()).unwrap_err();
        assert!(e.to_string().contains("already holds a run"), "{e}");
        let empty = tempfile::tempdir().unwrap();
        assert!(matches!(
            RunStore::open(empty.path()),
            Err(StoreError::Missing { .. })
        ));
    }

    /// A run killed as it started leaves a store with nothing in it; `run` into its directory
    /// starts afresh (`resume` has nothing to go on), while anything recorded, or a file that is
    /// not a store, is still refused.
    #[test]
    fn create_starts_afresh_over_a_store_that_recorded_nothing() {
        let dir = tempfile::tempdir().unwrap();
        drop(RunStore::create(dir.path()).unwrap());
        let mut s = RunStore::create(dir.path()).unwrap();
        s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
            .unwrap();
        drop(s);
        assert!(matches!(
            RunStore::create(dir.path()),
            Err(StoreError::Exists { .. })
        ));

        // A kill between creating the file and creating its tables.
        let empty_file = tempfile::tempdir().unwrap();
        fs_err::write(empty_file.path().join(DB_FILE), "").unwrap();
        assert!(RunStore::create(empty_file.path()).is_ok());

        let not_a_store = tempfile::tempdir().unwrap();
        fs_err::write(not_a_store.path().join(DB_FILE), "my notes").unwrap();
        assert!(matches!(
            RunStore::create(not_a_store.path()),
            Err(StoreError::Exists { .. })
        ));
        assert_eq!(
            fs_err::read_to_string(not_a_store.path().join(DB_FILE)).unwrap(),
            "my notes"
        );
    }

    #[test]
    fn a_planted_writer_lock_is_refused_not_written_through() {
        let victim_dir = tempfile::tempdir().unwrap();
        let victim = victim_dir.path().join("precious");
        fs_err::write(&victim, "keep me").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let mut s = RunStore::create(dir.path()).unwrap();
        s.transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
            .unwrap();
        drop(s);
        fs_err::remove_file(dir.path().join(LOCK_FILE)).unwrap();
        std::os::unix::fs::symlink(&victim, dir.path().join(LOCK_FILE)).unwrap();
        for e in [
            RunStore::create(dir.path()).unwrap_err(),
            RunStore::open_writer(dir.path()).unwrap_err(),
        ] {
            let msg = e.to_string();
            assert!(
                msg.contains(LOCK_FILE) && msg.contains("symbolic link"),
                "{msg}"
            );
        }
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");

        // A named pipe is refused at once rather than waited on.
        let fifo_dir = tempfile::tempdir().unwrap();
        let fifo = fifo_dir.path().join(LOCK_FILE);
        let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = RunStore::create(fifo_dir.path()).unwrap_err();
        assert!(e.to_string().contains("not a regular file"), "{e}");
    }

    #[test]
    fn an_artifact_that_is_no_regular_file_or_too_large_is_refused_unread() {
        let dir = tempfile::tempdir().unwrap();
        let s = RunStore::create(dir.path()).unwrap();
        let arts = dir.path().join(ARTIFACTS_DIR);
        let hash = |n: u8| format!("{n:064x}");
        std::os::unix::fs::symlink("/dev/zero", arts.join(hash(1))).unwrap();
        let c = std::ffi::CString::new(arts.join(hash(2)).to_str().unwrap()).unwrap();
        // SAFETY: a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let big = fs_err::File::create(arts.join(hash(3))).unwrap();
        big.set_len(64 << 30).unwrap(); // 64 GiB, no blocks
        fs_err::create_dir(arts.join(hash(4))).unwrap();
        let started = std::time::Instant::now();
        for (n, what) in [
            (1, "is a symbolic link"),
            (2, "is a named pipe"),
            (
                3,
                "has 68719476736 bytes, more than the largest artifact ksearch writes",
            ),
            (4, "is a directory"),
        ] {
            let e = s.read_artifact(&hash(n), "k.c").unwrap_err();
            assert!(
                matches!(&e, StoreError::BadArtifact { path, .. } if path == &arts.join(hash(n))),
                "{e}"
            );
            assert!(e.to_string().contains(what), "{e}");
        }
        assert!(started.elapsed() < std::time::Duration::from_secs(5));

        // Nothing larger is written either: it could not be read back.
        let huge = Source {
            file: "k.c".into(),
            text: "x".repeat(crate::MAX_ARTIFACT_BYTES + 1),
        };
        assert!(matches!(
            s.put_artifact(&huge),
            Err(StoreError::BadArtifact { .. })
        ));
        let largest = Source {
            file: "k.c".into(),
            text: "x".repeat(crate::MAX_ARTIFACT_BYTES),
        };
        let h = s.put_artifact(&largest).unwrap();
        assert_eq!(s.read_artifact(&h, "k.c").unwrap(), largest);
    }

    #[test]
    fn a_link_planted_at_an_artifact_s_temporary_name_is_not_written_through() {
        let victim_dir = tempfile::tempdir().unwrap();
        let victim = victim_dir.path().join("precious");
        fs_err::write(&victim, "keep me").unwrap();
        let dir = tempfile::tempdir().unwrap();
        let s = RunStore::create(dir.path()).unwrap();
        let text = "int planted;";
        let h = crate::content_hash(text);
        let tmp = dir
            .path()
            .join(ARTIFACTS_DIR)
            .join(format!(".{h}.{}.tmp", std::process::id()));
        std::os::unix::fs::symlink(&victim, &tmp).unwrap();
        let src = Source {
            file: "k.c".into(),
            text: text.into(),
        };
        assert_eq!(s.put_artifact(&src).unwrap(), h);
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");
        assert_eq!(s.read_artifact(&h, "k.c").unwrap(), src);
        // And a link planted at the artifact's own name is refused, not papered over.
        let other = "int other;";
        let oh = crate::content_hash(other);
        std::os::unix::fs::symlink(&victim, dir.path().join(ARTIFACTS_DIR).join(&oh)).unwrap();
        let e = s
            .put_artifact(&Source {
                file: "k.c".into(),
                text: other.into(),
            })
            .unwrap_err();
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(fs_err::read_to_string(&victim).unwrap(), "keep me");
    }

    #[test]
    fn an_older_store_is_migrated_and_keeps_its_data() {
        let dir = tempfile::tempdir().unwrap();
        {
            // Build a version-1 store by hand, as the first release wrote it.
            fs_err::create_dir_all(dir.path().join(ARTIFACTS_DIR)).unwrap();
            let conn = Connection::open(dir.path().join(DB_FILE)).unwrap();
            conn.execute_batch(MIGRATIONS[0]).unwrap();
            conn.pragma_update(None, "user_version", 1).unwrap();
            conn.execute("INSERT INTO state (id, data) VALUES (1, '7')", [])
                .unwrap();
        }
        // A reader reads it as it is, and changes nothing.
        let reader = RunStore::open(dir.path()).unwrap();
        assert_eq!(reader.schema_version().unwrap(), 1);
        assert_eq!(reader.state::<u32>().unwrap(), Some(7));
        assert!(reader.snapshot().unwrap().llm_calls.is_empty());
        drop(reader);
        // The writer (a resume) migrates it.
        let mut s = RunStore::open_writer(dir.path()).unwrap();
        assert_eq!(s.schema_version().unwrap(), SCHEMA_VERSION);
        assert_eq!(s.state::<u32>().unwrap(), Some(7));
        let call = LlmCallRecord {
            key: "k".into(),
            role: ksearch_core::record::ModelRole::Codegen,
            model: "openai:m".into(),
            purpose: "implement".into(),
            round: 3,
            request: serde_json::json!({"messages": []}),
            response: serde_json::json!({"text": "x"}),
            usage: Default::default(),
            cost_usd: Some(0.01),
            replayed: false,
            seconds: 1.0,
            unfinished_round: false,
        };
        s.transaction(|tx| tx.add_llm_call(&call)).unwrap();
        assert_eq!(s.snapshot().unwrap().llm_calls, vec![call]);
    }

    #[test]
    fn a_newer_schema_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        {
            let s = RunStore::create(dir.path()).unwrap();
            s.conn
                .pragma_update(None, "user_version", SCHEMA_VERSION + 1)
                .unwrap();
        }
        let e = RunStore::open(dir.path()).unwrap_err();
        assert!(
            matches!(e, StoreError::TooNew { found, .. } if found == SCHEMA_VERSION + 1),
            "{e}"
        );
    }

    #[test]
    fn artifacts_are_content_addressed() {
        let dir = tempfile::tempdir().unwrap();
        let s = RunStore::create(dir.path()).unwrap();
        let src = Source {
            file: "k.c".into(),
            text: "int x;".into(),
        };
        let h = s.put_artifact(&src).unwrap();
        assert_eq!(h, crate::content_hash("int x;"));
        assert_eq!(s.put_artifact(&src).unwrap(), h);
        assert_eq!(s.read_artifact(&h, "k.c").unwrap(), src);
        assert!(matches!(
            s.read_artifact(&"0".repeat(64), "k.c"),
            Err(StoreError::MissingArtifact { .. })
        ));
        assert!(s.read_artifact("../../etc/passwd", "x").is_err());
    }

    #[test]
    fn one_writer_at_a_time_and_readers_never_wait() {
        let dir = tempfile::tempdir().unwrap();
        let writer = RunStore::create(dir.path()).unwrap();
        assert!(writer.is_writer());
        let held = fs_err::read_to_string(dir.path().join(LOCK_FILE)).unwrap();
        assert_eq!(held, std::process::id().to_string());

        // A second writer is refused at once, told who holds the run.
        let e = RunStore::open_writer(dir.path()).unwrap_err();
        assert!(
            matches!(e, StoreError::Busy { holder: Some(p), .. } if p == std::process::id()),
            "{e}"
        );
        assert!(e.to_string().contains("in use by another ksearch"), "{e}");
        // Even one trying to create it again: busy first, not "exists".
        assert!(matches!(
            RunStore::create(dir.path()),
            Err(StoreError::Busy { .. })
        ));
        // A reader opens it meanwhile and sees what the writer committed.
        let mut writer = writer;
        writer
            .transaction(|tx| tx.set_meta("task", &"cpu/softmax"))
            .unwrap();
        let reader = RunStore::open(dir.path()).unwrap();
        assert!(!reader.is_writer());
        assert_eq!(
            reader.meta::<String>("task").unwrap().as_deref(),
            Some("cpu/softmax")
        );
        // The lock goes with the writer.
        drop(writer);
        let again = RunStore::open_writer(dir.path()).unwrap();
        assert!(again.is_writer());
    }

    #[test]
    fn a_tampered_artifact_is_refused_and_named() {
        let dir = tempfile::tempdir().unwrap();
        let s = RunStore::create(dir.path()).unwrap();
        let src = Source {
            file: "k.c".into(),
            text: "int x;".into(),
        };
        let h = s.put_artifact(&src).unwrap();
        let path = dir.path().join(ARTIFACTS_DIR).join(&h);
        fs_err::write(&path, "int x; /* backdoor */").unwrap();
        let e = s.read_artifact(&h, "k.c").unwrap_err();
        match &e {
            StoreError::TamperedArtifact {
                path: p,
                expected,
                actual,
            } => {
                assert_eq!(p, &path);
                assert_eq!(expected, &h);
                assert_eq!(actual, &crate::content_hash("int x; /* backdoor */"));
            }
            other => panic!("{other}"),
        }
        let msg = e.to_string();
        assert!(
            msg.contains(&path.display().to_string()) && msg.contains(&h),
            "{msg}"
        );
        // Storing the same source again does not paper over it either.
        assert!(matches!(
            s.put_artifact(&src),
            Err(StoreError::TamperedArtifact { .. })
        ));
    }

    #[test]
    fn a_record_holding_nan_or_infinity_is_refused_and_nothing_is_written() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RunStore::create(dir.path()).unwrap();
        let mut bad = attempt(1);
        bad.payload = serde_json::json!({"ok": 1.0});
        let mut sol = seed_solution();
        sol.speedup = Some(f64::INFINITY);
        let tree = Tree::new(Vec::new(), sol);
        let e = s
            .transaction(|tx| {
                tx.put_attempt(&bad)?;
                tx.put_node(tree.root())
            })
            .unwrap_err();
        assert!(
            matches!(&e, StoreError::NonFinite { what, at, .. } if what == "node 0" && at == "solution.speedup"),
            "{e}"
        );
        assert!(e.to_string().contains("a bug"), "{e}");
        let snap = s.snapshot().unwrap();
        assert!(snap.attempts.is_empty() && snap.nodes.is_empty());
        // State, events and meta go through the same check.
        #[derive(serde::Serialize)]
        struct State {
            wall_s: f64,
        }
        assert!(matches!(
            s.transaction(|tx| tx.set_state(&State { wall_s: f64::NAN })),
            Err(StoreError::NonFinite { .. })
        ));
        assert!(matches!(
            s.transaction(|tx| tx.add_event(
                1,
                "x",
                &State {
                    wall_s: f64::NEG_INFINITY
                }
            )),
            Err(StoreError::NonFinite { .. })
        ));
        assert!(matches!(
            s.transaction(|tx| tx.set_meta("config", &State { wall_s: f64::NAN })),
            Err(StoreError::NonFinite { .. })
        ));
        assert_eq!(s.state::<serde_json::Value>().unwrap(), None);
    }

    #[test]
    fn a_corrupt_record_names_the_field() {
        let dir = tempfile::tempdir().unwrap();
        let mut s = RunStore::create(dir.path()).unwrap();
        s.transaction(|tx| {
            tx.set_meta("config", &serde_json::json!({"eval": {"timeout_s": null}}))
        })
        .unwrap();
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Eval {
            timeout_s: f64,
        }
        #[derive(Debug, serde::Deserialize)]
        #[allow(dead_code)]
        struct Config {
            eval: Eval,
        }
        let e = s.meta::<Config>("config").unwrap_err();
        assert!(
            matches!(&e, StoreError::Corrupt { at, .. } if at == "eval.timeout_s"),
            "{e}"
        );
        assert!(e.to_string().contains("field `eval.timeout_s`"), "{e}");
    }
}
