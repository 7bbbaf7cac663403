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

/// Whether the run in `dir` is at rest: no writer holds its lock (asked by taking the lock
/// shared and letting it go at once, so that a reader never keeps a writer from starting) and
/// its last writer left no write-ahead log, so that `db` holds every committed record. A writer
/// that starts while a reader reads such a run writes to a log the reader does not see, until
/// its first checkpoint (after about 4 MB of records).
fn at_rest(dir: &Path, db: &Path) -> bool {
    use std::os::unix::fs::OpenOptionsExt as _;
    let beside = |suffix: &str| {
        let mut name = db.as_os_str().to_owned();
        name.push(suffix);
        PathBuf::from(name)
    };
    if fs_err::symlink_metadata(beside("-wal")).is_ok()
        || fs_err::symlink_metadata(beside("-shm")).is_ok()
    {
        return false;
    }
    let Ok(lock) = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(dir.join(LOCK_FILE))
    else {
        return false;
    };
    lock.metadata().is_ok_and(|m| m.is_file()) && lock.try_lock_shared().is_ok()
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
        // so it is read as immutable. So is a run no writer holds whose writer left no log:
        // its database file is the whole run, and a reader in WAL mode would leave -shm and
        // -wal files behind (only a writer removes them).
        let conn = if at_rest(dir, &db) {
            Connection::open_with_flags(immutable_uri(&db), flags)
                .and_then(readable)
                .map_err(sql)?
        } else {
            match Connection::open_with_flags(&db, flags).and_then(readable) {
                Ok(conn) => conn,
                Err(first) => Connection::open_with_flags(immutable_uri(&db), flags)
                    .and_then(readable)
                    .map_err(|_| sql(first))?,
            }
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
mod tests;
