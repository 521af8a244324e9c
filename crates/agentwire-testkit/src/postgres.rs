//! A real PostgreSQL server for tests: one private cluster per test binary, initialised into a
//! temporary folder, listening on a free loopback port, and stopped when the binary exits.

use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// Where Debian's `postgresql-15` puts its server programs; `AGENTWIRE_PG_BINDIR` overrides it.
pub const POSTGRES_BINDIR: &str = "/usr/lib/postgresql/15/bin";

/// How long the server may take to accept connections after it was started.
const STARTUP_LIMIT: Duration = Duration::from_secs(60);

/// The columns of the event log's `aw_events` table, in its order: what the benchmarks'
/// anchors insert.
pub const AW_EVENTS_COLUMNS: [&str; 7] = [
    "thread",
    "seq",
    "event_id",
    "kind",
    "committed_at",
    "size",
    "payload",
];

/// The text of one `INSERT` of `rows` rows into `table`'s `columns`, its parameters numbered
/// row by row (`($1, $2), ($3, $4)` for two rows of two columns): the multi-row insert the
/// benchmarks' PostgreSQL anchors commit as one transaction. SQLite reads the same text (its
/// `$N` parameters numbered in order of appearance), so one row of it is the SQLite anchors'
/// insert too.
pub fn multi_row_insert(table: &str, columns: &[&str], rows: usize) -> String {
    let mut sql = format!("INSERT INTO {table} ({}) VALUES ", columns.join(", "));
    for row in 0..rows {
        if row > 0 {
            sql.push(',');
        }
        sql.push('(');
        for column in 0..columns.len() {
            if column > 0 {
                sql.push_str(", ");
            }
            sql.push_str(&format!("${}", row * columns.len() + column + 1));
        }
        sql.push(')');
    }
    sql
}

/// A running test cluster. Connect as `postgres` (trust authentication, loopback only).
#[derive(Debug)]
pub struct PostgresServer {
    port: u16,
    bindir: PathBuf,
    // Closing this pipe (when the test binary exits, however it exits) makes the wrapper shell
    // stop the server and remove its folder.
    _lifeline: Mutex<ChildStdin>,
    _child: Mutex<Child>,
}

impl PostgresServer {
    /// The loopback port the server listens on.
    pub fn port(&self) -> u16 {
        self.port
    }

    /// A URL for database `db` on this server.
    pub fn url(&self, db: &str) -> String {
        format!("postgres://postgres@127.0.0.1:{}/{db}", self.port)
    }

    /// Creates a fresh, uniquely named database and returns its URL.
    pub fn fresh_database(&self, prefix: &str) -> String {
        static NEXT: AtomicU64 = AtomicU64::new(0);
        let name = format!(
            "{prefix}_{}_{}",
            std::process::id(),
            NEXT.fetch_add(1, Ordering::Relaxed)
        );
        self.psql(&format!("CREATE DATABASE {name}"));
        self.url(&name)
    }

    /// Runs one SQL command through `psql` against the `postgres` database; panics with its
    /// output if it fails.
    pub fn psql(&self, sql: &str) {
        let output = Command::new(self.bindir.join("psql"))
            .args([
                "-h",
                "127.0.0.1",
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
            ])
            .args(["-d", "postgres", "-v", "ON_ERROR_STOP=1", "-q", "-c", sql])
            .output()
            .unwrap_or_else(|e| panic!("cannot run psql: {e}"));
        assert!(
            output.status.success(),
            "psql -c {sql:?} failed: {}",
            String::from_utf8_lossy(&output.stderr)
        );
    }
}

/// The test binary's PostgreSQL server, started on first use. Panics, saying what is missing,
/// when it cannot be started: a test that needs it never passes without it.
pub fn postgres_server() -> &'static PostgresServer {
    static SERVER: OnceLock<PostgresServer> = OnceLock::new();
    SERVER.get_or_init(|| match start() {
        Ok(server) => server,
        Err(reason) => panic!(
            "cannot start the test PostgreSQL server: {reason}. The tests need Debian's \
             postgresql-15 ({POSTGRES_BINDIR}, or set AGENTWIRE_PG_BINDIR): run {} (it installs it)",
            crate::INSTALL_COMMAND
        ),
    })
}

fn start() -> Result<PostgresServer, String> {
    let bindir = std::env::var_os("AGENTWIRE_PG_BINDIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(POSTGRES_BINDIR));
    for program in ["initdb", "postgres", "pg_isready", "psql"] {
        let path = bindir.join(program);
        if !path.is_file() {
            return Err(format!("{} is missing", path.display()));
        }
    }
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or(0);
    let dir = std::env::temp_dir().join(format!("agentwire-pg-{}-{nanos}", std::process::id()));
    std::fs::create_dir(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    // PostgreSQL refuses to run as root: as root, the cluster belongs to the `postgres` user.
    let as_postgres = running_as_root(&dir);
    if as_postgres {
        let status = Command::new("chown")
            .args(["postgres:postgres"])
            .arg(&dir)
            .status()
            .map_err(|e| format!("cannot run chown: {e}"))?;
        if !status.success() {
            return Err("chown postgres: failed (is there a postgres user?)".into());
        }
    }
    let command = |program: &str| {
        let mut c = if as_postgres {
            let mut c = Command::new("runuser");
            c.args(["-u", "postgres", "--"]).arg(bindir.join(program));
            c
        } else {
            Command::new(bindir.join(program))
        };
        c.current_dir(&dir);
        c
    };
    let data = dir.join("data");
    let output = command("initdb")
        .arg("-D")
        .arg(&data)
        .args(["-U", "postgres", "--auth=trust", "-E", "UTF8", "--no-sync"])
        .output()
        .map_err(|e| format!("cannot run initdb: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "initdb failed: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let port = free_port()?;
    let script = concat!(
        "\"$1\" -D \"$2\" -p \"$3\" -k \"$4\" -c listen_addresses=127.0.0.1 -c max_connections=200 ",
        ">\"$4/server.log\" 2>&1 & pg=$!; cat >/dev/null; kill -INT $pg; wait $pg; rm -rf \"$4\""
    );
    let mut child = if as_postgres {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--", "sh", "-c", script, "sh"]);
        c
    } else {
        let mut c = Command::new("sh");
        c.args(["-c", script, "sh"]);
        c
    }
    .arg(bindir.join("postgres"))
    .arg(&data)
    .arg(port.to_string())
    .arg(&dir)
    .stdin(Stdio::piped())
    .stdout(Stdio::null())
    .stderr(Stdio::null())
    .spawn()
    .map_err(|e| format!("cannot start postgres: {e}"))?;
    let lifeline = child
        .stdin
        .take()
        .ok_or("no stdin pipe to the server wrapper")?;
    let started = Instant::now();
    loop {
        if let Ok(Some(status)) = child.try_wait() {
            return Err(format!(
                "postgres exited with {status}: {}",
                read_log(&dir.join("server.log"))
            ));
        }
        let ready = Command::new(bindir.join("pg_isready"))
            .args(["-q", "-h", "127.0.0.1", "-p", &port.to_string()])
            .status()
            .map(|s| s.success())
            .unwrap_or(false);
        if ready {
            break;
        }
        if started.elapsed() > STARTUP_LIMIT {
            return Err(format!(
                "postgres did not accept connections within {STARTUP_LIMIT:?}: {}",
                read_log(&dir.join("server.log"))
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Ok(PostgresServer {
        port,
        bindir,
        _lifeline: Mutex::new(lifeline),
        _child: Mutex::new(child),
    })
}

fn running_as_root(dir: &Path) -> bool {
    use std::os::unix::fs::MetadataExt;
    std::fs::metadata(dir)
        .map(|m| m.uid() == 0)
        .unwrap_or(false)
}

fn free_port() -> Result<u16, String> {
    let listener =
        TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind 127.0.0.1:0: {e}"))?;
    listener
        .local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no local address: {e}"))
}

fn read_log(path: &Path) -> String {
    let mut text = String::new();
    if let Ok(mut file) = std::fs::File::open(path) {
        let _ = file.read_to_string(&mut text);
    }
    text
}

#[cfg(test)]
mod tests {
    use super::multi_row_insert;

    #[test]
    fn a_multi_row_insert_numbers_its_parameters_row_by_row() {
        assert_eq!(
            multi_row_insert("t", &["a", "b"], 2),
            "INSERT INTO t (a, b) VALUES ($1, $2),($3, $4)"
        );
        assert_eq!(
            multi_row_insert("t", &["a"], 1),
            "INSERT INTO t (a) VALUES ($1)"
        );
    }
}
