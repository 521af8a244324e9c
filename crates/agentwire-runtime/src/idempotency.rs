//! Idempotent mutations: a bounded cache of the results of completed mutations by request id,
//! so a retry gets the first result instead of a second side effect. The same id with other
//! params is refused; a mutation still in flight is never evicted, and a retry of it waits for
//! it rather than running again.

use std::collections::{HashMap, VecDeque};

/// The protocol's default capacity (`idempotencyCacheEntries`).
pub const DEFAULT_IDEMPOTENCY_ENTRIES: usize = 10_000;

/// What to do with a mutation that arrived with a request id.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission<V> {
    /// First time: run it, then [`IdempotencyCache::complete`] (or
    /// [`IdempotencyCache::abandon`] if it failed before any effect).
    Run,
    /// Already completed with these params: answer this result again.
    Replay(V),
    /// The same request is running now: answer when it completes.
    InFlight,
    /// The id was used for another method or other params (`INVALID_PARAMS`).
    Mismatch,
}

#[derive(Debug, Clone)]
enum Entry<V> {
    InFlight { fingerprint: String },
    Done { fingerprint: String, result: V },
}

/// The cache; `fingerprint` is whatever identifies method and params exactly (canonical text).
#[derive(Debug, Clone)]
pub struct IdempotencyCache<V> {
    capacity: usize,
    entries: HashMap<String, Entry<V>>,
    /// Completed ids, oldest first: the eviction order.
    completed: VecDeque<String>,
}

impl<V: Clone> IdempotencyCache<V> {
    /// A cache keeping the results of the last `capacity` completed mutations (at least one).
    pub fn new(capacity: usize) -> Self {
        IdempotencyCache {
            capacity: capacity.max(1),
            entries: HashMap::new(),
            completed: VecDeque::new(),
        }
    }

    /// Decides what to do with mutation `request_id` whose method and params are `fingerprint`.
    pub fn admit(&mut self, request_id: &str, fingerprint: &str) -> Admission<V> {
        match self.entries.get(request_id) {
            None => {
                self.entries.insert(
                    request_id.to_owned(),
                    Entry::InFlight {
                        fingerprint: fingerprint.to_owned(),
                    },
                );
                Admission::Run
            }
            Some(Entry::InFlight { fingerprint: f }) if f == fingerprint => Admission::InFlight,
            Some(Entry::Done {
                fingerprint: f,
                result,
            }) if f == fingerprint => Admission::Replay(result.clone()),
            Some(_) => Admission::Mismatch,
        }
    }

    /// Records the result of an admitted mutation; the oldest completed entry beyond the
    /// capacity is evicted.
    pub fn complete(&mut self, request_id: &str, result: V) {
        let Some(Entry::InFlight { fingerprint }) = self.entries.remove(request_id) else {
            return;
        };
        self.entries.insert(
            request_id.to_owned(),
            Entry::Done {
                fingerprint,
                result,
            },
        );
        self.completed.push_back(request_id.to_owned());
        while self.completed.len() > self.capacity {
            if let Some(old) = self.completed.pop_front() {
                self.entries.remove(&old);
            }
        }
    }

    /// Forgets an admitted mutation that failed without effect, so a retry runs it again.
    pub fn abandon(&mut self, request_id: &str) {
        if let Some(Entry::InFlight { .. }) = self.entries.get(request_id) {
            self.entries.remove(request_id);
        }
    }

    /// Completed entries held.
    pub fn completed_len(&self) -> usize {
        self.completed.len()
    }

    /// Entries held, in flight and completed.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }
}
