//! The threads a connection is attached to: those whose live events it is sent.

use std::collections::{HashMap, HashSet};
use std::sync::Mutex;

use super::lock;

/// A connection's attached threads: kept ones, and those attached for operations still running.
#[derive(Debug, Default)]
pub(super) struct Attached {
    /// Attached by a thread's creation or by an operation that succeeded.
    kept: HashSet<String>,
    /// Attached for operations still running, and how many: an operation attaches its thread
    /// before it runs, so that no event published meanwhile is missed, and lets go if it fails.
    running: HashMap<String, usize>,
}

impl Attached {
    /// Whether the connection is sent `thread_id`'s live events.
    pub(super) fn contains(&self, thread_id: &str) -> bool {
        self.kept.contains(thread_id) || self.running.contains_key(thread_id)
    }

    /// Attaches `thread_id` for good (until it is detached).
    pub(super) fn keep(&mut self, thread_id: &str) {
        self.kept.insert(thread_id.to_owned());
    }

    /// Detaches `thread_id`; whether it was attached for good.
    pub(super) fn remove(&mut self, thread_id: &str) -> bool {
        self.kept.remove(thread_id)
    }
}

/// An operation's attachment of a thread while it runs: kept with [`Attaching::keep`] once the
/// operation succeeded, let go when dropped otherwise. A thread attached otherwise too (kept, or
/// by another operation of the connection running at the same time) stays attached.
pub(super) struct Attaching<'a> {
    attached: &'a Mutex<Attached>,
    thread_id: &'a str,
    keep: bool,
}

impl<'a> Attaching<'a> {
    /// Attaches `thread_id` in `attached` while the operation runs.
    pub(super) fn new(attached: &'a Mutex<Attached>, thread_id: &'a str) -> Self {
        *lock(attached)
            .running
            .entry(thread_id.to_owned())
            .or_default() += 1;
        Attaching {
            attached,
            thread_id,
            keep: false,
        }
    }

    /// The operation succeeded: the thread stays attached.
    pub(super) fn keep(mut self) {
        self.keep = true;
    }
}

impl Drop for Attaching<'_> {
    fn drop(&mut self) {
        let mut attached = lock(self.attached);
        if let Some(running) = attached.running.get_mut(self.thread_id) {
            *running -= 1;
            if *running == 0 {
                attached.running.remove(self.thread_id);
            }
        }
        if self.keep {
            attached.keep(self.thread_id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::{Attached, Attaching};

    /// An operation that fails lets its thread go only if nothing else attached it: not while
    /// another operation on it runs or after one succeeded, nor when it was attached already.
    #[test]
    fn a_failed_operation_detaches_only_what_nothing_else_attached() {
        let attached = Mutex::new(Attached::default());
        let failing = Attaching::new(&attached, "t");
        let succeeding = Attaching::new(&attached, "t");
        assert!(attached.lock().unwrap().contains("t"));
        succeeding.keep();
        drop(failing);
        assert!(attached.lock().unwrap().contains("t"));

        let failing = Attaching::new(&attached, "u");
        drop(failing);
        assert!(!attached.lock().unwrap().contains("u"));

        assert!(attached.lock().unwrap().remove("t"));
        assert!(!attached.lock().unwrap().contains("t"));
        attached.lock().unwrap().keep("t");
        drop(Attaching::new(&attached, "t"));
        assert!(attached.lock().unwrap().contains("t"));
    }
}
