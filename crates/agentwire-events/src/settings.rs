//! The settings a log is opened with, and the parsing of store URLs.

use std::path::PathBuf;
use std::time::Duration;

use crate::error::{Error, Result};
use crate::limits::{
    DEFAULT_FOREIGN_COMMIT_POLL, DEFAULT_JOURNAL_SIZE_LIMIT, DEFAULT_MAX_BATCH_APPENDS,
    DEFAULT_MAX_BATCH_BYTES, DEFAULT_QUEUE_BYTES, DEFAULT_QUEUE_CAPACITY, DEFAULT_READERS,
    DEFAULT_WAL_AUTOCHECKPOINT_PAGES, MAX_BATCH_BYTES, MAX_QUEUE_BYTES, MAX_QUEUE_CAPACITY,
    MAX_READERS, MAX_RECORD_BYTES,
};

/// SQLite's `synchronous` setting for the writer connection.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Synchronous {
    /// `FULL`: the WAL is synced at every commit, so an acknowledged append survives power loss.
    #[default]
    Full,
    /// `NORMAL`: survives a crash of the process but an acknowledged append may be lost on
    /// power loss (the WAL is synced only at checkpoints).
    Normal,
}

/// How a log is run. [`Settings::default`] is what [`open`](crate::open) uses.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Settings {
    /// SQLite durability (PostgreSQL always runs with `synchronous_commit = on`).
    pub synchronous: Synchronous,
    /// Appends waiting for the writer; a full queue makes `append` wait.
    pub queue_capacity: usize,
    /// Bytes the commands waiting for the writer may hold, until the writer has run them
    /// (appends' payloads and kinds, checkpoints' states); a command larger than this is
    /// queued alone. At most [`MAX_QUEUE_BYTES`].
    pub queue_bytes: usize,
    /// Most appends in one group commit.
    pub max_batch_appends: usize,
    /// Most bytes in one group commit (the first append is always taken whole); at most
    /// [`MAX_BATCH_BYTES`].
    pub max_batch_bytes: usize,
    /// The record limit; at most [`MAX_RECORD_BYTES`].
    pub max_record_bytes: usize,
    /// Reader connections (SQLite) or the read pool's size (PostgreSQL).
    pub readers: usize,
    /// SQLite: WAL pages after which a commit checkpoints passively.
    pub wal_autocheckpoint_pages: u32,
    /// SQLite: the WAL file is truncated to this size after a checkpoint.
    pub journal_size_limit: u64,
    /// SQLite: how often a live tail checks for commits made by another process (commits of
    /// this process wake tails at once). `None` turns the check off.
    pub foreign_commit_poll: Option<Duration>,
}

impl Default for Settings {
    fn default() -> Self {
        Self {
            synchronous: Synchronous::Full,
            queue_capacity: DEFAULT_QUEUE_CAPACITY,
            queue_bytes: DEFAULT_QUEUE_BYTES,
            max_batch_appends: DEFAULT_MAX_BATCH_APPENDS,
            max_batch_bytes: DEFAULT_MAX_BATCH_BYTES,
            max_record_bytes: MAX_RECORD_BYTES,
            readers: DEFAULT_READERS,
            wal_autocheckpoint_pages: DEFAULT_WAL_AUTOCHECKPOINT_PAGES,
            journal_size_limit: DEFAULT_JOURNAL_SIZE_LIMIT,
            foreign_commit_poll: Some(DEFAULT_FOREIGN_COMMIT_POLL),
        }
    }
}

impl Settings {
    pub(crate) fn check(&self) -> Result<()> {
        let positive = |name: &'static str, v: usize| {
            if v == 0 {
                Err(Error::InvalidSetting {
                    name,
                    reason: "must be at least 1".into(),
                })
            } else {
                Ok(())
            }
        };
        positive("queue_capacity", self.queue_capacity)?;
        positive("queue_bytes", self.queue_bytes)?;
        positive("max_batch_appends", self.max_batch_appends)?;
        positive("max_batch_bytes", self.max_batch_bytes)?;
        positive("readers", self.readers)?;
        positive("max_record_bytes", self.max_record_bytes)?;
        let at_most = |name: &'static str, v: usize, limit: usize| {
            if v > limit {
                Err(Error::InvalidSetting {
                    name,
                    reason: format!("{v} is over the limit of {limit}"),
                })
            } else {
                Ok(())
            }
        };
        at_most("queue_capacity", self.queue_capacity, MAX_QUEUE_CAPACITY)?;
        at_most("queue_bytes", self.queue_bytes, MAX_QUEUE_BYTES)?;
        at_most("readers", self.readers, MAX_READERS)?;
        at_most("max_batch_bytes", self.max_batch_bytes, MAX_BATCH_BYTES)?;
        at_most("max_record_bytes", self.max_record_bytes, MAX_RECORD_BYTES)?;
        Ok(())
    }
}

/// A parsed store URL.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StoreUrl {
    /// `sqlite:PATH` (or `sqlite://PATH`): a file, created when missing.
    Sqlite(PathBuf),
    /// `postgres://…` or `postgresql://…`, as libpq and tokio-postgres read it.
    Postgres(String),
}

/// `url` as it may be shown or logged: a PostgreSQL URL's password (in its user info, or a
/// `password` parameter) is replaced by `***`; anything else is returned as it is.
pub fn redact_store_url(url: &str) -> String {
    let Some(scheme_end) = ["postgres://", "postgresql://"]
        .iter()
        .find(|scheme| url.starts_with(*scheme))
        .map(|scheme| scheme.len())
    else {
        return url.to_owned();
    };
    let (head, rest) = url.split_at(scheme_end);
    let authority_end = rest.find(['/', '?']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rfind('@') {
        Some(at) => {
            let (user_info, host) = authority.split_at(at);
            match user_info.split_once(':') {
                Some((user, _password)) => format!("{user}:***{host}"),
                None => authority.to_owned(),
            }
        }
        None => authority.to_owned(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let query: Vec<String> = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((key, _)) if key.eq_ignore_ascii_case("password") => format!("{key}=***"),
                    _ => pair.to_owned(),
                })
                .collect();
            format!("{path}?{}", query.join("&"))
        }
        None => tail.to_owned(),
    };
    format!("{head}{authority}{tail}")
}

impl StoreUrl {
    /// Parses `sqlite:PATH`, `sqlite://PATH`, `postgres://…` or `postgresql://…`.
    pub fn parse(url: &str) -> Result<Self> {
        let invalid = |reason: &str| Error::InvalidUrl {
            url: redact_store_url(url),
            reason: reason.to_string(),
        };
        if let Some(rest) = url.strip_prefix("sqlite:") {
            let path = rest.strip_prefix("//").unwrap_or(rest);
            if path.is_empty() {
                return Err(invalid("no file path after sqlite:"));
            }
            return Ok(StoreUrl::Sqlite(PathBuf::from(path)));
        }
        if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            url.parse::<tokio_postgres::Config>()
                .map_err(|e| invalid(&e.to_string()))?;
            return Ok(StoreUrl::Postgres(url.to_string()));
        }
        Err(invalid("expected sqlite:PATH or postgres://…"))
    }
}

#[cfg(test)]
mod tests {
    use super::redact_store_url;

    #[test]
    fn a_store_urls_password_is_redacted() {
        for (url, shown) in [
            (
                "postgres://u:S3cret@127.0.0.1:5432/db",
                "postgres://u:***@127.0.0.1:5432/db",
            ),
            (
                "postgresql://u:p%40ss@h/db?sslmode=disable&password=x",
                "postgresql://u:***@h/db?sslmode=disable&password=***",
            ),
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h/db?PASSWORD=x", "postgres://h/db?PASSWORD=***"),
            ("sqlite:/tmp/a:b@c.db", "sqlite:/tmp/a:b@c.db"),
        ] {
            assert_eq!(redact_store_url(url), shown, "{url}");
        }
        let err = super::StoreUrl::parse("postgres://u:S3cret@h:notaport/db").unwrap_err();
        assert!(!err.to_string().contains("S3cret"), "{err}");
    }
}
