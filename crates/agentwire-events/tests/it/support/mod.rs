//! Test support: stores to run the conformance cases against (a SQLite file, a PostgreSQL
//! database on the test binary's own server) and small event builders.

#![allow(dead_code, unreachable_pub)]

use std::path::PathBuf;
use std::sync::Arc;

use agentwire_events::{EventLog, NewEvent, Settings, ThreadId, open_with};

/// One store of one engine: opening it again after a close sees the same log.
#[derive(Debug)]
pub struct Store {
    pub url: String,
    pub settings: Settings,
    _dir: Option<tempfile::TempDir>,
}

impl Store {
    pub fn sqlite() -> Self {
        let dir = tempfile::tempdir().expect("tempdir");
        let path: PathBuf = dir.path().join("events.db");
        Self {
            url: format!("sqlite:{}", path.display()),
            // Only commits of this process wake tails here, so a tail that wakes was woken by
            // the commit signal, not by the foreign-commit check.
            settings: Settings {
                foreign_commit_poll: None,
                ..Settings::default()
            },
            _dir: Some(dir),
        }
    }

    pub fn postgres() -> Self {
        let server = agentwire_testkit::postgres_server();
        Self {
            url: server.fresh_database("conformance"),
            settings: Settings::default(),
            _dir: None,
        }
    }

    pub async fn open(&self) -> Arc<dyn EventLog> {
        open_with(&self.url, self.settings.clone())
            .await
            .unwrap_or_else(|e| panic!("open {}: {e}", self.url))
    }
}

pub fn thread(name: &str) -> ThreadId {
    ThreadId::new(name).expect("thread id")
}

/// `n` events of kind `kind` whose payloads are `"{prefix}-{i}"`.
pub fn events(kind: &str, prefix: &str, n: usize) -> Vec<NewEvent> {
    (0..n)
        .map(|i| NewEvent::new(kind, format!("{prefix}-{i}")))
        .collect()
}
