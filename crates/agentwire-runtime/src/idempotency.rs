//! Idempotent mutations: the answers of completed mutations kept by (caller scope, key), so a
//! retry gets the first answer instead of a second side effect. Each face defines its keys: a
//! Roll connection's `requestId` in the scope `roll`, the App Server's `idempotencyKey`,
//! OpenClaw's `<method family>:<key>`. What identifies a mutation exactly (its method and
//! canonical params) is kept only as its SHA-256 fingerprint; answers are kept as the bytes the
//! face encoded. The store is bounded in entries and in bytes (the oldest completed entries go
//! first), and entries may expire by time on the store's clock. A mutation still in flight is
//! never evicted; a retry of it waits for it rather than running again.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sha2::{Digest, Sha256};
use tokio::sync::Notify;

use crate::core::Clock;

/// The default number of completed mutations kept (Roll's `idempotencyCacheEntries`).
pub const DEFAULT_IDEMPOTENCY_ENTRIES: usize = 10_000;

/// The default bytes of keys and answers kept.
pub const DEFAULT_IDEMPOTENCY_BYTES: usize = 16 * 1024 * 1024;

/// What an entry costs besides its key and answer bytes (its fingerprint, times, map slots).
const ENTRY_OVERHEAD_BYTES: usize = 128;

/// The SHA-256 of what identifies a mutation exactly.
pub type Fingerprint = [u8; 32];

/// The fingerprint of a mutation given as its parts (each length-prefixed, so no two
/// different part lists hash alike).
pub fn fingerprint(parts: &[&[u8]]) -> Fingerprint {
    let mut hash = Sha256::new();
    for part in parts {
        hash.update((part.len() as u64).to_be_bytes());
        hash.update(part);
    }
    hash.finalize().into()
}

/// The limits of an [`IdempotencyStore`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct IdempotencyLimits {
    /// Completed entries kept at most (at least one).
    pub entries: usize,
    /// Bytes of completed entries kept at most (keys, answers and a fixed overhead each).
    pub bytes: usize,
    /// How long a completed entry is kept (for ever, within the other limits, when `None`).
    pub ttl: Option<Duration>,
}

impl Default for IdempotencyLimits {
    fn default() -> Self {
        IdempotencyLimits {
            entries: DEFAULT_IDEMPOTENCY_ENTRIES,
            bytes: DEFAULT_IDEMPOTENCY_BYTES,
            ttl: None,
        }
    }
}

/// What to do with a mutation that arrived with an idempotency key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Admission {
    /// First time: run it, then [`IdempotencyStore::complete`] (or
    /// [`IdempotencyStore::abandon`] if it failed before any effect).
    Run,
    /// Already completed with the same fingerprint: answer these bytes again.
    Replay(Arc<[u8]>),
    /// The same mutation is running now: wait ([`IdempotencyStore::completed`]) and ask again.
    InFlight,
    /// The key was used for another mutation.
    Mismatch,
}

type Key = (String, String);

#[derive(Debug)]
enum Entry {
    InFlight {
        fingerprint: Fingerprint,
    },
    Done {
        fingerprint: Fingerprint,
        answer: Arc<[u8]>,
        /// Its place in the eviction order.
        serial: u64,
    },
}

#[derive(Debug, Default)]
struct State {
    entries: HashMap<Key, Entry>,
    /// Completed entries, oldest first: (serial, key, completed at, bytes).
    order: VecDeque<(u64, Key, u64, usize)>,
    bytes: usize,
    serial: u64,
}

/// The store. Cheap to share behind an `Arc`; every method takes `&self`.
#[derive(Debug)]
pub struct IdempotencyStore {
    limits: IdempotencyLimits,
    clock: Arc<dyn Clock>,
    state: Mutex<State>,
    done: Notify,
}

impl IdempotencyStore {
    /// An empty store with `limits`, its expiry on `clock`.
    pub fn new(limits: IdempotencyLimits, clock: Arc<dyn Clock>) -> IdempotencyStore {
        IdempotencyStore {
            limits: IdempotencyLimits {
                entries: limits.entries.max(1),
                ..limits
            },
            clock,
            state: Mutex::new(State::default()),
            done: Notify::new(),
        }
    }

    /// The store's limits.
    pub fn limits(&self) -> IdempotencyLimits {
        self.limits
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Decides what to do with the mutation `key` of `scope` whose fingerprint is
    /// `fingerprint`; on [`Admission::Run`] the key is held in flight.
    pub fn admit(&self, scope: &str, key: &str, fingerprint: &Fingerprint) -> Admission {
        let mut state = self.lock();
        self.expire(&mut state);
        let id = (scope.to_owned(), key.to_owned());
        match state.entries.get(&id) {
            None => {
                state.entries.insert(
                    id,
                    Entry::InFlight {
                        fingerprint: *fingerprint,
                    },
                );
                Admission::Run
            }
            Some(Entry::InFlight { fingerprint: f }) if f == fingerprint => Admission::InFlight,
            Some(Entry::Done {
                fingerprint: f,
                answer,
                ..
            }) if f == fingerprint => Admission::Replay(Arc::clone(answer)),
            Some(_) => Admission::Mismatch,
        }
    }

    /// Resolves once some mutation in flight completed or was abandoned; create it before
    /// [`admit`](Self::admit) answers [`Admission::InFlight`], then await it and admit again.
    pub fn completed(&self) -> tokio::sync::futures::Notified<'_> {
        self.done.notified()
    }

    /// Keeps the answer of an admitted mutation; the oldest completed entries beyond the
    /// limits are evicted. An answer larger than the whole byte limit is not kept (a retry
    /// runs the mutation again).
    pub fn complete(&self, scope: &str, key: &str, answer: &[u8]) {
        let id = (scope.to_owned(), key.to_owned());
        let mut state = self.lock();
        let Some(Entry::InFlight { fingerprint }) = state.entries.remove(&id) else {
            return;
        };
        let bytes = ENTRY_OVERHEAD_BYTES + scope.len() + key.len() + answer.len();
        if bytes <= self.limits.bytes {
            state.serial += 1;
            let serial = state.serial;
            state.entries.insert(
                id.clone(),
                Entry::Done {
                    fingerprint,
                    answer: Arc::from(answer),
                    serial,
                },
            );
            let now = self.clock.now_ms();
            state.order.push_back((serial, id, now, bytes));
            state.bytes += bytes;
            while state.order.len() > self.limits.entries || state.bytes > self.limits.bytes {
                Self::evict_oldest(&mut state);
            }
        }
        drop(state);
        self.done.notify_waiters();
    }

    /// Replaces the kept answer of a completed mutation with `answer`, its outcome known later
    /// (a run's end after the run was accepted): retries are answered it from then on. Kept as
    /// a new completion, under the same limits; nothing when the key is not completed (never
    /// run, in flight, evicted or expired).
    pub fn amend(&self, scope: &str, key: &str, answer: &[u8]) {
        let id = (scope.to_owned(), key.to_owned());
        let mut state = self.lock();
        let Some(Entry::Done { fingerprint, .. }) = state.entries.get(&id) else {
            return;
        };
        let fingerprint = *fingerprint;
        // An answer too large to keep leaves the earlier one (forgetting it would let a retry
        // run the mutation again).
        if ENTRY_OVERHEAD_BYTES + scope.len() + key.len() + answer.len() > self.limits.bytes {
            return;
        }
        // The entry goes back in flight and is completed again: the older completion's bytes
        // stay counted until its place in the order is evicted, which leaves the newer entry.
        state.entries.insert(id, Entry::InFlight { fingerprint });
        drop(state);
        self.complete(scope, key, answer);
    }

    /// Forgets an admitted mutation that failed without effect, so a retry runs it again.
    pub fn abandon(&self, scope: &str, key: &str) {
        let id = (scope.to_owned(), key.to_owned());
        let mut state = self.lock();
        if let Some(Entry::InFlight { .. }) = state.entries.get(&id) {
            state.entries.remove(&id);
        }
        drop(state);
        self.done.notify_waiters();
    }

    fn evict_oldest(state: &mut State) {
        let Some((serial, id, _, bytes)) = state.order.pop_front() else {
            return;
        };
        state.bytes -= bytes;
        // A key completed again later has a newer serial: only this completion goes.
        if matches!(state.entries.get(&id), Some(Entry::Done { serial: s, .. }) if *s == serial) {
            state.entries.remove(&id);
        }
    }

    fn expire(&self, state: &mut State) {
        let Some(ttl) = self.limits.ttl else { return };
        let ttl = u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX);
        let now = self.clock.now_ms();
        while state
            .order
            .front()
            .is_some_and(|(_, _, at, _)| at.saturating_add(ttl) <= now)
        {
            Self::evict_oldest(state);
        }
    }

    /// Completed entries held.
    pub fn completed_len(&self) -> usize {
        self.lock().order.len()
    }

    /// Bytes of completed entries held.
    pub fn completed_bytes(&self) -> usize {
        self.lock().bytes
    }

    /// Entries held, in flight and completed.
    pub fn len(&self) -> usize {
        self.lock().entries.len()
    }

    /// Whether nothing is held.
    pub fn is_empty(&self) -> bool {
        self.lock().entries.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::ManualClock;

    fn new_store(
        entries: usize,
        bytes: usize,
        ttl: Option<Duration>,
    ) -> (IdempotencyStore, Arc<ManualClock>) {
        let clock = Arc::new(ManualClock::new(1_000));
        let limits = IdempotencyLimits {
            entries,
            bytes,
            ttl,
        };
        (IdempotencyStore::new(limits, clock.clone()), clock)
    }

    #[test]
    fn the_store_is_bounded_in_entries_and_bytes() {
        let (store, _) = new_store(3, 1 << 20, None);
        let f = fingerprint(&[b"m"]);
        for i in 0..5 {
            let key = format!("k{i}");
            assert_eq!(store.admit("s", &key, &f), Admission::Run);
            store.complete("s", &key, b"x");
        }
        assert_eq!(store.completed_len(), 3);
        assert_eq!(
            store.admit("s", "k0", &f),
            Admission::Run,
            "the oldest went first"
        );
        assert!(matches!(store.admit("s", "k4", &f), Admission::Replay(_)));

        let limit = 4 * (ENTRY_OVERHEAD_BYTES + 1 + 2 + 1000);
        let (store, _) = new_store(1_000, limit, None);
        for i in 0..100 {
            let key = format!("{i:02}");
            let _ = store.admit("s", &key, &f);
            store.complete("s", &key, &[b'a'; 1000]);
            assert!(store.completed_bytes() <= limit);
        }
        // An answer larger than the whole limit is not kept.
        assert_eq!(store.admit("s", "big", &f), Admission::Run);
        store.complete("s", "big", &vec![0u8; limit]);
        assert_eq!(store.admit("s", "big", &f), Admission::Run);
    }

    #[test]
    fn entries_expire_on_the_clock() {
        let (store, clock) = new_store(10, 1 << 20, Some(Duration::from_secs(300)));
        let f = fingerprint(&[b"m"]);
        assert_eq!(store.admit("s", "k", &f), Admission::Run);
        store.complete("s", "k", b"a");
        clock.advance(299_999);
        assert!(matches!(store.admit("s", "k", &f), Admission::Replay(_)));
        clock.advance(1);
        assert_eq!(store.admit("s", "k", &f), Admission::Run);
    }

    /// An amended answer replaces the kept one for later retries, within the byte limit; a key
    /// not completed is left alone, and an answer too large to keep leaves the earlier one.
    #[test]
    fn an_amended_answer_is_replayed() {
        let limit = 2 * (ENTRY_OVERHEAD_BYTES + 1 + 1 + 100);
        let (store, _) = new_store(10, limit, None);
        let f = fingerprint(&[b"m"]);
        assert_eq!(store.admit("s", "k", &f), Admission::Run);
        store.amend("s", "k", b"early");
        assert_eq!(store.admit("s", "k", &f), Admission::InFlight);
        store.complete("s", "k", b"accepted");
        store.amend("s", "k", b"final");
        let Admission::Replay(answer) = store.admit("s", "k", &f) else {
            panic!("not replayed")
        };
        assert_eq!(&*answer, b"final");
        store.amend("s", "k", &vec![0u8; limit]);
        let Admission::Replay(answer) = store.admit("s", "k", &f) else {
            panic!("not replayed")
        };
        assert_eq!(&*answer, b"final");
        for _ in 0..10 {
            store.amend("s", "k", b"again");
            assert!(store.completed_bytes() <= limit);
        }
        store.amend("s", "never", b"x");
        assert_eq!(store.admit("s", "never", &f), Admission::Run);
    }
}
