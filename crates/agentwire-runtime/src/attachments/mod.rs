//! Attachments: files a host stages for a thread and then names in a turn's input. The store owns
//! their lifecycle (staged → committed → released or expired), their limits and their content,
//! which it keeps in files of a spool directory, never in memory. It knows no wire encoding;
//! faces decode their uploads and map [`AttachmentError`]'s variants onto their error registries.
//!
//! Every call runs its work whole on tokio's blocking pool: a caller that stops waiting does not
//! leave a half-written chunk or a reserved quota slot behind. The map of attachments sits behind
//! a std mutex held only for bookkeeping, never during file I/O; calls on one attachment (its
//! chunks and its commit) are serialised by a lock of that attachment alone.
//!
//! This module holds the store, its map of attachments and the bookkeeping of that map (expiry,
//! release, the attachments of a turn); `types` the limits, requests and descriptors, `error`
//! why a call is refused, `stage` staging and its checks, `upload` the chunks of an upload and
//! its commit with the content verified, and `spool` the spool directory's files.

mod error;
mod spool;
mod stage;
mod types;
mod upload;

use std::collections::{HashMap, HashSet};
use std::fs::{self, File};
use std::io;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sha2::Sha256;

use self::error::not_found;
use self::spool::{claim_spool, release_spool};
use crate::core::{Clock, SystemClock};
use crate::event::AttachmentPart;

pub use self::error::{AttachmentError, PathRejection, SizeLimit, TypeRejection};
pub use self::stage::display_name;
pub use self::types::{
    AttachmentDescriptor, AttachmentLimits, AttachmentSource, AttachmentState, ChunkProgress,
    MediaType, StageRequest, StageSource, Staged,
};

/// The protocol's default per-file limit (`maxAttachmentBytes`, 16 MiB).
pub const DEFAULT_MAX_ATTACHMENT_BYTES: u64 = 16 * 1024 * 1024;
/// The protocol's default per-chunk limit of raw bytes (`maxAttachmentChunkBytes`, 2 MiB).
pub const DEFAULT_MAX_CHUNK_BYTES: u64 = 2 * 1024 * 1024;
/// The protocol's default number of attachments one turn may name (`maxTurnAttachments`).
pub const DEFAULT_MAX_TURN_ATTACHMENTS: usize = 8;
/// The protocol's default number of retained attachments (`maxStagedAttachments`).
pub const DEFAULT_MAX_RETAINED: usize = 16;
/// How long an attachment lives after it was staged or committed. The protocol fixes no value;
/// this is the runtime's choice.
pub const DEFAULT_TTL: Duration = Duration::from_secs(30 * 60);
/// The longest file name, in UTF-16 code units (the protocol counts JavaScript `length`).
pub const MAX_FILE_NAME_UNITS: usize = 255;
/// The display name of a file name that sanitises to nothing.
pub const FALLBACK_DISPLAY_NAME: &str = "attachment";

/// Suffix of the spool files; the stem is the attachment id.
const SPOOL_SUFFIX: &str = ".attachment";

/// The store. Cheap to clone: clones share the attachments. Each attachment belongs to the
/// thread it was staged for; any other thread gets `NotFound` for it.
#[derive(Debug, Clone)]
pub struct AttachmentStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    /// The store's own directory in the spool directory.
    spool: PathBuf,
    /// Locked for the store's life: the directory is this store's.
    _lock: std::fs::File,
    limits: AttachmentLimits,
    ttl_ms: u64,
    clock: Arc<dyn Clock>,
    entries: Mutex<HashMap<String, Entry>>,
}

#[derive(Debug)]
struct Entry {
    thread_id: String,
    descriptor: AttachmentDescriptor,
    /// When it was staged or, once committed, committed: its age starts there.
    since_ms: u64,
    phase: Phase,
}

#[derive(Debug)]
enum Phase {
    /// A stage is copying or creating its file; not visible to other calls yet.
    Reserved,
    /// Staged for chunks.
    Uploading(Arc<Mutex<Upload>>),
    /// Committed.
    Committed,
}

#[derive(Debug)]
struct Upload {
    received: u64,
    next_sequence: u64,
    hasher: Sha256,
    last: Option<LastChunk>,
    /// Whether it still takes chunks.
    end: UploadEnd,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum UploadEnd {
    /// Chunks are welcome.
    Open,
    /// Committed: no more chunks.
    Committed,
    /// The content did not match and was discarded.
    Discarded,
}

#[derive(Debug, Clone, Copy)]
struct LastChunk {
    sequence: u64,
    offset: u64,
    len: u64,
}

impl AttachmentStore {
    /// A store with its content in a directory of its own in `spool_dir` (created if missing,
    /// owner-only on Unix), locked for the store's life, and the system clock. Stores sharing
    /// `spool_dir` (two processes on one state directory) keep apart; what stores that are gone
    /// left there is removed: their attachments died with them.
    pub fn new(
        spool_dir: impl Into<PathBuf>,
        limits: AttachmentLimits,
    ) -> Result<AttachmentStore, AttachmentError> {
        AttachmentStore::with_clock(spool_dir, limits, Arc::new(SystemClock))
    }

    /// [`new`](Self::new) with a clock of the caller's (tests expire attachments with it).
    pub fn with_clock(
        spool_dir: impl Into<PathBuf>,
        limits: AttachmentLimits,
        clock: Arc<dyn Clock>,
    ) -> Result<AttachmentStore, AttachmentError> {
        let (spool, lock) = claim_spool(&spool_dir.into())
            .map_err(AttachmentError::storage("setting up the spool directory"))?;
        let ttl_ms = u64::try_from(limits.ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(AttachmentStore {
            inner: Arc::new(Inner {
                spool,
                _lock: lock,
                limits,
                ttl_ms,
                clock,
                entries: Mutex::new(HashMap::new()),
            }),
        })
    }

    /// The store's limits.
    pub fn limits(&self) -> &AttachmentLimits {
        &self.inner.limits
    }

    /// Stages an attachment for `thread_id`. `chunks`: staged empty. `local-path`: the file is
    /// copied into the spool while it is hashed, and committed if its size and SHA-256 are the
    /// declared ones (else `HashMismatch`, nothing kept).
    pub async fn stage(
        &self,
        thread_id: &str,
        request: StageRequest,
    ) -> Result<Staged, AttachmentError> {
        let thread_id = thread_id.to_owned();
        self.run(move |inner| inner.stage(thread_id, request)).await
    }

    /// Appends chunk `sequence` of a staged `chunks` attachment. Chunks come in order from 0;
    /// the last accepted chunk sent again with the same data is answered as before. A refused
    /// chunk changes nothing.
    pub async fn chunk(
        &self,
        thread_id: &str,
        attachment_id: &str,
        sequence: u64,
        data: &[u8],
    ) -> Result<ChunkProgress, AttachmentError> {
        let (thread_id, attachment_id) = (thread_id.to_owned(), attachment_id.to_owned());
        let data = data.to_vec();
        self.run(move |inner| inner.chunk(&thread_id, &attachment_id, sequence, &data))
            .await
    }

    /// Commits a staged `chunks` attachment: all declared bytes must have arrived
    /// (`UploadIncomplete`, still staged) and hash to the declared SHA-256 (`HashMismatch`, the
    /// attachment and its data discarded). Committing a committed attachment answers its
    /// descriptor again.
    pub async fn commit(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<AttachmentDescriptor, AttachmentError> {
        let (thread_id, attachment_id) = (thread_id.to_owned(), attachment_id.to_owned());
        self.run(move |inner| inner.commit(&thread_id, &attachment_id))
            .await
    }

    /// Releases an attachment of `thread_id`, staged or committed, and removes its content.
    /// `false` when there was none to release (unknown, already released, expired, another
    /// thread's).
    pub async fn release(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<bool, AttachmentError> {
        let (thread_id, attachment_id) = (thread_id.to_owned(), attachment_id.to_owned());
        self.run(move |inner| Ok(inner.release(&thread_id, &attachment_id)))
            .await
    }

    /// Releases every attachment of `thread_id` (the thread was deleted); how many there were.
    pub async fn release_thread(&self, thread_id: &str) -> Result<usize, AttachmentError> {
        let thread_id = thread_id.to_owned();
        self.run(move |inner| Ok(inner.release_thread(&thread_id)))
            .await
    }

    /// The message parts of the attachments a turn of `thread_id` names, in the order named:
    /// at most [`AttachmentLimits::max_turn_attachments`], each once, each committed. The
    /// attachments stay retained.
    pub async fn for_turn<S: AsRef<str>>(
        &self,
        thread_id: &str,
        attachment_ids: &[S],
    ) -> Result<Vec<AttachmentPart>, AttachmentError> {
        let thread_id = thread_id.to_owned();
        let attachment_ids: Vec<String> = attachment_ids
            .iter()
            .map(|id| id.as_ref().to_owned())
            .collect();
        self.run(move |inner| inner.for_turn(&thread_id, &attachment_ids))
            .await
    }

    /// A committed attachment's descriptor and its content, opened for reading (what an agent
    /// reads when a turn names it).
    pub async fn open(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<(AttachmentDescriptor, File), AttachmentError> {
        let (thread_id, attachment_id) = (thread_id.to_owned(), attachment_id.to_owned());
        self.run(move |inner| inner.open(&thread_id, &attachment_id))
            .await
    }

    /// Removes every expired attachment and its content; how many there were. Every call of
    /// the store also does this first, so expired attachments never count against the quota;
    /// a periodic sweep only frees their disk space sooner.
    pub async fn sweep(&self) -> Result<usize, AttachmentError> {
        self.run(|inner| Ok(inner.sweep())).await
    }

    /// Attachments retained now (staged, being staged, committed; not expired).
    pub async fn retained(&self) -> Result<usize, AttachmentError> {
        self.run(|inner| {
            inner.sweep();
            Ok(inner.lock().len())
        })
        .await
    }

    /// Runs `work` whole on the blocking pool: it finishes even if the caller stops waiting.
    async fn run<T, F>(&self, work: F) -> Result<T, AttachmentError>
    where
        T: Send + 'static,
        F: FnOnce(&Inner) -> Result<T, AttachmentError> + Send + 'static,
    {
        let inner = Arc::clone(&self.inner);
        tokio::task::spawn_blocking(move || work(&inner))
            .await
            .map_err(|error| AttachmentError::Storage {
                action: "running a store call",
                source: io::Error::other(error.to_string()),
            })?
    }
}

impl Inner {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, Entry>> {
        // Nothing panics while the map is half-updated, so a poisoned map is still whole.
        self.entries.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn path_of(&self, attachment_id: &str) -> PathBuf {
        self.spool.join(format!("{attachment_id}{SPOOL_SUFFIX}"))
    }

    fn is_expired(&self, entry: &Entry, now_ms: u64) -> bool {
        !matches!(entry.phase, Phase::Reserved)
            && now_ms.saturating_sub(entry.since_ms) > self.ttl_ms
    }

    /// Takes the expired entries out of the map; their files are for [`Inner::remove_files`].
    fn take_expired(&self, entries: &mut HashMap<String, Entry>) -> Vec<PathBuf> {
        let now_ms = self.clock.now_ms();
        let expired: Vec<String> = entries
            .iter()
            .filter(|(_, entry)| self.is_expired(entry, now_ms))
            .map(|(id, _)| id.clone())
            .collect();
        for id in &expired {
            entries.remove(id);
        }
        expired.iter().map(|id| self.path_of(id)).collect()
    }

    fn remove_files(&self, paths: &[PathBuf]) {
        for path in paths {
            if let Err(error) = fs::remove_file(path)
                && error.kind() != io::ErrorKind::NotFound
            {
                tracing::warn!(path = %path.display(), %error, "cannot remove an attachment's spool file");
            }
        }
    }

    fn sweep(&self) -> usize {
        let expired = self.take_expired(&mut self.lock());
        self.remove_files(&expired);
        expired.len()
    }

    /// Sweeps, then runs `look` on the map with the entry of `attachment_id` if it is
    /// `thread_id`'s and visible (not reserved).
    fn with_entry<T>(
        &self,
        thread_id: &str,
        attachment_id: &str,
        look: impl FnOnce(&mut HashMap<String, Entry>) -> Result<T, AttachmentError>,
    ) -> Result<T, AttachmentError> {
        let (result, expired) = {
            let mut entries = self.lock();
            let expired = self.take_expired(&mut entries);
            let visible = entries.get(attachment_id).is_some_and(|entry| {
                entry.thread_id == thread_id && !matches!(entry.phase, Phase::Reserved)
            });
            let result = if visible {
                look(&mut entries)
            } else {
                Err(not_found(attachment_id))
            };
            (result, expired)
        };
        self.remove_files(&expired);
        result
    }

    fn release(&self, thread_id: &str, attachment_id: &str) -> bool {
        let removed = self.with_entry(thread_id, attachment_id, |entries| {
            Ok(entries.remove(attachment_id))
        });
        match removed {
            Ok(Some(_)) => {
                self.remove_files(&[self.path_of(attachment_id)]);
                true
            }
            _ => false,
        }
    }

    fn release_thread(&self, thread_id: &str) -> usize {
        let (released, expired) = {
            let mut entries = self.lock();
            let expired = self.take_expired(&mut entries);
            let ids: Vec<String> = entries
                .iter()
                .filter(|(_, entry)| {
                    entry.thread_id == thread_id && !matches!(entry.phase, Phase::Reserved)
                })
                .map(|(id, _)| id.clone())
                .collect();
            for id in &ids {
                entries.remove(id);
            }
            (ids, expired)
        };
        self.remove_files(&expired);
        let paths: Vec<PathBuf> = released.iter().map(|id| self.path_of(id)).collect();
        self.remove_files(&paths);
        released.len()
    }

    fn for_turn(
        &self,
        thread_id: &str,
        attachment_ids: &[String],
    ) -> Result<Vec<AttachmentPart>, AttachmentError> {
        if attachment_ids.len() > self.limits.max_turn_attachments {
            return Err(AttachmentError::TooManyForTurn {
                count: attachment_ids.len(),
                max: self.limits.max_turn_attachments,
            });
        }
        let mut seen = HashSet::new();
        if let Some(twice) = attachment_ids.iter().find(|id| !seen.insert(id.as_str())) {
            return Err(AttachmentError::DuplicateInTurn {
                attachment_id: twice.clone(),
            });
        }
        let (parts, expired) = {
            let mut entries = self.lock();
            let expired = self.take_expired(&mut entries);
            let parts = attachment_ids
                .iter()
                .map(|id| match entries.get(id) {
                    Some(entry) if entry.thread_id == thread_id => match entry.phase {
                        Phase::Committed => Ok(entry.descriptor.to_part()),
                        Phase::Uploading(_) => Err(AttachmentError::NotCommitted {
                            attachment_id: id.clone(),
                        }),
                        Phase::Reserved => Err(not_found(id)),
                    },
                    _ => Err(not_found(id)),
                })
                .collect::<Result<Vec<_>, _>>();
            (parts, expired)
        };
        self.remove_files(&expired);
        parts
    }

    fn open(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<(AttachmentDescriptor, File), AttachmentError> {
        let descriptor = self.with_entry(thread_id, attachment_id, |entries| {
            let entry = entries
                .get(attachment_id)
                .ok_or_else(|| not_found(attachment_id))?;
            match entry.phase {
                Phase::Committed => Ok(entry.descriptor.clone()),
                _ => Err(AttachmentError::NotCommitted {
                    attachment_id: attachment_id.to_owned(),
                }),
            }
        })?;
        match File::open(self.path_of(attachment_id)) {
            Ok(file) => Ok((descriptor, file)),
            // Released or expired since it was looked up.
            Err(error) if error.kind() == io::ErrorKind::NotFound => Err(not_found(attachment_id)),
            Err(source) => Err(AttachmentError::Storage {
                action: "opening a spool file",
                source,
            }),
        }
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        let entries = std::mem::take(
            self.entries
                .get_mut()
                .unwrap_or_else(PoisonError::into_inner),
        );
        let paths: Vec<PathBuf> = entries.keys().map(|id| self.path_of(id)).collect();
        self.remove_files(&paths);
        release_spool(&self.spool);
    }
}
