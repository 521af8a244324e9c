//! Attachments: files a host stages for a thread and then names in a turn's input. The store owns
//! their lifecycle (staged → committed → released or expired), their limits and their content,
//! which it keeps in files of a spool directory, never in memory. It knows no wire encoding;
//! faces decode their uploads and map [`AttachmentError::roll_code`] onto their error registries.
//!
//! Every call runs its work whole on tokio's blocking pool: a caller that stops waiting does not
//! leave a half-written chunk or a reserved quota slot behind. The map of attachments sits behind
//! a std mutex held only for bookkeeping, never during file I/O; calls on one attachment (its
//! chunks and its commit) are serialised by a lock of that attachment alone.

use std::collections::{HashMap, HashSet};
use std::fmt;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use sha2::{Digest as _, Sha256};

use crate::core::{Clock, SystemClock};
use crate::event::AttachmentPart;

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
/// Bytes read at a time when a local file is copied into the spool.
const COPY_BUFFER_BYTES: usize = 64 * 1024;

/// A media type an attachment may have: the protocol's seven.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum MediaType {
    /// `image/png`
    Png,
    /// `image/jpeg`
    Jpeg,
    /// `image/gif`
    Gif,
    /// `image/webp`
    Webp,
    /// `application/pdf`
    Pdf,
    /// `text/plain`
    PlainText,
    /// `text/markdown`
    Markdown,
}

impl MediaType {
    /// All of them, in the protocol's order.
    pub const ALL: [MediaType; 7] = [
        MediaType::Png,
        MediaType::Jpeg,
        MediaType::Gif,
        MediaType::Webp,
        MediaType::Pdf,
        MediaType::PlainText,
        MediaType::Markdown,
    ];

    /// Parses the media type's name (exactly, as the protocol spells it).
    pub fn parse(text: &str) -> Option<MediaType> {
        MediaType::ALL.into_iter().find(|t| t.as_str() == text)
    }

    /// The media type's name.
    pub fn as_str(self) -> &'static str {
        match self {
            MediaType::Png => "image/png",
            MediaType::Jpeg => "image/jpeg",
            MediaType::Gif => "image/gif",
            MediaType::Webp => "image/webp",
            MediaType::Pdf => "application/pdf",
            MediaType::PlainText => "text/plain",
            MediaType::Markdown => "text/markdown",
        }
    }

    /// The file-name extensions (lower case, without the dot) that agree with it; an
    /// extension is compared ignoring ASCII case.
    pub fn extensions(self) -> &'static [&'static str] {
        match self {
            MediaType::Png => &["png"],
            MediaType::Jpeg => &["jpg", "jpeg"],
            MediaType::Gif => &["gif"],
            MediaType::Webp => &["webp"],
            MediaType::Pdf => &["pdf"],
            MediaType::PlainText => &["txt", "text", "log"],
            MediaType::Markdown => &["md", "markdown"],
        }
    }
}

impl fmt::Display for MediaType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The limits of a store. `Default` is the protocol's defaults, every media type, and
/// [`DEFAULT_TTL`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentLimits {
    /// Largest attachment, declared or actual (`maxAttachmentBytes`).
    pub max_bytes: u64,
    /// Largest chunk of raw bytes (`maxAttachmentChunkBytes`).
    pub max_chunk_bytes: u64,
    /// Most attachments one turn may name (`maxTurnAttachments`).
    pub max_turn_attachments: usize,
    /// Most attachments the store retains at once, staged plus committed-but-unreleased and
    /// not expired, over all threads (`maxStagedAttachments`).
    pub max_retained: usize,
    /// How long an attachment lives after it was staged (while staged) or committed.
    pub ttl: Duration,
    /// The media types accepted.
    pub media_types: Vec<MediaType>,
}

impl Default for AttachmentLimits {
    fn default() -> Self {
        AttachmentLimits {
            max_bytes: DEFAULT_MAX_ATTACHMENT_BYTES,
            max_chunk_bytes: DEFAULT_MAX_CHUNK_BYTES,
            max_turn_attachments: DEFAULT_MAX_TURN_ATTACHMENTS,
            max_retained: DEFAULT_MAX_RETAINED,
            ttl: DEFAULT_TTL,
            media_types: MediaType::ALL.to_vec(),
        }
    }
}

/// Where an attachment's content came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentSource {
    /// Copied from a file of the runtime's machine (`local-path`).
    LocalPath,
    /// Uploaded in chunks (`chunks`).
    Chunks,
}

impl AttachmentSource {
    /// The protocol's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttachmentSource::LocalPath => "local-path",
            AttachmentSource::Chunks => "chunks",
        }
    }
}

/// Where the content of an attachment being staged comes from.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum StageSource {
    /// A file on this machine: an absolute path to a regular file, not a symlink.
    LocalPath(PathBuf),
    /// Chunks that follow.
    Chunks,
}

impl StageSource {
    /// The source without its path.
    pub fn kind(&self) -> AttachmentSource {
        match self {
            StageSource::LocalPath(_) => AttachmentSource::LocalPath,
            StageSource::Chunks => AttachmentSource::Chunks,
        }
    }
}

/// What the host declares when it stages an attachment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StageRequest {
    /// The file's name, 1..=255 UTF-16 code units.
    pub file_name: String,
    /// Its media type's name; one of [`AttachmentLimits::media_types`], agreeing with the file
    /// name's extension.
    pub media_type: String,
    /// Its exact size, at least 1 and at most [`AttachmentLimits::max_bytes`].
    pub bytes: u64,
    /// Its SHA-256, 64 lower-case hex digits.
    pub sha256: String,
    /// Where the content comes from.
    pub source: StageSource,
}

/// The state of an attachment the store holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum AttachmentState {
    /// Waiting for chunks and a commit.
    Staged,
    /// Verified; a turn may name it.
    Committed,
}

impl AttachmentState {
    /// The protocol's name.
    pub fn as_str(self) -> &'static str {
        match self {
            AttachmentState::Staged => "staged",
            AttachmentState::Committed => "committed",
        }
    }
}

/// What an attachment is, for hosts and turns: never a path or the content.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AttachmentDescriptor {
    /// Its id (a UUID the store made).
    pub attachment_id: String,
    /// The file name as declared.
    pub file_name: String,
    /// The sanitised name shown to people ([`display_name`]).
    pub display_name: String,
    /// Its media type.
    pub media_type: MediaType,
    /// Its size.
    pub bytes: u64,
    /// Its SHA-256, lower-case hex.
    pub sha256: String,
    /// Where its content came from.
    pub source: AttachmentSource,
    /// When it was staged, in milliseconds since the Unix epoch.
    pub created_at_ms: u64,
}

impl AttachmentDescriptor {
    /// The attachment as a part of a message.
    pub fn to_part(&self) -> AttachmentPart {
        AttachmentPart {
            attachment_id: self.attachment_id.clone(),
            media_type: self.media_type.as_str().to_owned(),
            bytes: self.bytes,
            display_name: self.display_name.clone(),
        }
    }
}

/// The answer to a stage: a `chunks` attachment is staged empty, a `local-path` one is copied,
/// verified and committed at once (and then carries its descriptor).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The new attachment's id.
    pub attachment_id: String,
    /// Its state.
    pub state: AttachmentState,
    /// Its descriptor, when it is committed.
    pub descriptor: Option<AttachmentDescriptor>,
}

/// How far a chunked upload got.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ChunkProgress {
    /// Bytes received so far.
    pub received_bytes: u64,
    /// The sequence number the next chunk must carry.
    pub next_sequence: u64,
}

/// Which size limit an attachment broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeLimit {
    /// [`AttachmentLimits::max_bytes`], by the declared or the actual size.
    Attachment,
    /// [`AttachmentLimits::max_chunk_bytes`], by one chunk.
    Chunk,
    /// The declared size, by the chunks received.
    Declared,
}

impl fmt::Display for SizeLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            SizeLimit::Attachment => "the attachment limit",
            SizeLimit::Chunk => "the chunk limit",
            SizeLimit::Declared => "the declared size",
        })
    }
}

/// Why a media type was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TypeRejection {
    /// The media type is not one the store accepts.
    MediaType,
    /// The file name's extension does not agree with the media type.
    Extension,
}

/// Why a local path was refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PathRejection {
    /// It is not absolute.
    NotAbsolute,
    /// It cannot be `lstat`ed, opened or read.
    Unreadable,
    /// It is a symbolic link.
    Symlink,
    /// It is not a regular file (a directory, a device, a socket, a FIFO).
    NotRegularFile,
    /// What was opened is not what was `lstat`ed (the path was replaced meanwhile).
    Changed,
}

impl fmt::Display for PathRejection {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PathRejection::NotAbsolute => "is not absolute",
            PathRejection::Unreadable => "cannot be read",
            PathRejection::Symlink => "is a symbolic link",
            PathRejection::NotRegularFile => "is not a regular file",
            PathRejection::Changed => "changed while it was opened",
        })
    }
}

/// Why the store refused a call. [`code`](Self::code) is stable per variant;
/// [`roll_code`](Self::roll_code) maps the eight attachment kinds one-to-one onto the Roll
/// registry, [`is_invalid_params`](Self::is_invalid_params) says which others are the caller's
/// malformed input, and [`Storage`](Self::Storage) is the store's own failure.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum AttachmentError {
    /// Unknown, released, expired, or another thread's.
    #[error(
        "attachment {attachment_id} not found (unknown, released, expired, or another thread's)"
    )]
    NotFound { attachment_id: String },
    /// A turn named an attachment that is still staged.
    #[error("attachment {attachment_id} is not committed")]
    NotCommitted { attachment_id: String },
    /// A size over a limit: the declared or actual size over the attachment limit, a chunk over
    /// the chunk limit, or the chunks over the declared size.
    #[error("{bytes} bytes exceed {limit} of {max} bytes")]
    TooLarge {
        limit: SizeLimit,
        bytes: u64,
        max: u64,
    },
    /// A media type not accepted, or a file name whose extension disagrees with it.
    #[error("{}", type_message(media_type, file_name, *reason))]
    TypeUnsupported {
        media_type: String,
        file_name: String,
        reason: TypeRejection,
    },
    /// The content is not what was declared (size or SHA-256); it was discarded.
    #[error("the content (sha256 {actual}) is not the declared one (sha256 {declared}); discarded")]
    HashMismatch { declared: String, actual: String },
    /// The store already retains its maximum of attachments.
    #[error("{max} attachments are already retained; release one or let one expire")]
    QuotaExceeded { max: usize },
    /// A commit before all declared bytes arrived.
    #[error("{received} of the declared {declared} bytes received")]
    UploadIncomplete { received: u64, declared: u64 },
    /// A local path that may not be read.
    #[error("source path {} {reason}", path.display())]
    PathRejected {
        path: PathBuf,
        reason: PathRejection,
    },
    /// A file name not 1..=255 UTF-16 code units long.
    #[error("a file name must be 1..=255 UTF-16 code units, not {units}")]
    InvalidFileName { units: usize },
    /// A SHA-256 that is not 64 lower-case hex digits.
    #[error("sha256 must be 64 lower-case hex digits")]
    InvalidSha256,
    /// A declared size of zero.
    #[error("an attachment has at least one byte")]
    InvalidSize,
    /// A chunk without data.
    #[error("a chunk has at least one byte")]
    EmptyChunk,
    /// A chunk whose sequence is not the next one expected.
    #[error("chunk {got} arrived where chunk {expected} was expected")]
    ChunkOutOfOrder { expected: u64, got: u64 },
    /// The last accepted chunk sent again with other data.
    #[error("chunk {sequence} was already accepted with other data")]
    ChunkConflict { sequence: u64 },
    /// A chunk for an attachment that takes none (committed, or from a local path).
    #[error("attachment {attachment_id} takes no chunks: it is committed")]
    NotUploading { attachment_id: String },
    /// A turn naming more attachments than allowed.
    #[error("a turn names at most {max} attachments, not {count}")]
    TooManyForTurn { count: usize, max: usize },
    /// A turn naming an attachment twice.
    #[error("attachment {attachment_id} is named twice")]
    DuplicateInTurn { attachment_id: String },
    /// The spool failed.
    #[error("attachment storage: {action}: {source}")]
    Storage {
        action: &'static str,
        #[source]
        source: io::Error,
    },
}

fn type_message(media_type: &str, file_name: &str, reason: TypeRejection) -> String {
    match reason {
        TypeRejection::MediaType => format!("media type {media_type:?} is not supported"),
        TypeRejection::Extension => {
            format!("the extension of {file_name:?} does not agree with {media_type}")
        }
    }
}

impl AttachmentError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            AttachmentError::NotFound { .. } => "runtime.attachment.not-found",
            AttachmentError::NotCommitted { .. } => "runtime.attachment.not-committed",
            AttachmentError::TooLarge { .. } => "runtime.attachment.too-large",
            AttachmentError::TypeUnsupported { .. } => "runtime.attachment.type-unsupported",
            AttachmentError::HashMismatch { .. } => "runtime.attachment.hash-mismatch",
            AttachmentError::QuotaExceeded { .. } => "runtime.attachment.quota-exceeded",
            AttachmentError::UploadIncomplete { .. } => "runtime.attachment.upload-incomplete",
            AttachmentError::PathRejected { .. } => "runtime.attachment.path-rejected",
            AttachmentError::InvalidFileName { .. } => "runtime.attachment.invalid-file-name",
            AttachmentError::InvalidSha256 => "runtime.attachment.invalid-sha256",
            AttachmentError::InvalidSize => "runtime.attachment.invalid-size",
            AttachmentError::EmptyChunk => "runtime.attachment.empty-chunk",
            AttachmentError::ChunkOutOfOrder { .. } => "runtime.attachment.chunk-out-of-order",
            AttachmentError::ChunkConflict { .. } => "runtime.attachment.chunk-conflict",
            AttachmentError::NotUploading { .. } => "runtime.attachment.not-uploading",
            AttachmentError::TooManyForTurn { .. } => "runtime.attachment.too-many-for-turn",
            AttachmentError::DuplicateInTurn { .. } => "runtime.attachment.duplicate-in-turn",
            AttachmentError::Storage { .. } => "runtime.attachment.storage",
        }
    }

    /// The Roll `rollCode` of the eight attachment kinds, one variant each; `None` for the
    /// others (invalid params, or the store's own failure).
    pub fn roll_code(&self) -> Option<&'static str> {
        match self {
            AttachmentError::NotFound { .. } => Some("ATTACHMENT_NOT_FOUND"),
            AttachmentError::NotCommitted { .. } => Some("ATTACHMENT_NOT_COMMITTED"),
            AttachmentError::TooLarge { .. } => Some("ATTACHMENT_TOO_LARGE"),
            AttachmentError::TypeUnsupported { .. } => Some("ATTACHMENT_TYPE_UNSUPPORTED"),
            AttachmentError::HashMismatch { .. } => Some("ATTACHMENT_HASH_MISMATCH"),
            AttachmentError::QuotaExceeded { .. } => Some("ATTACHMENT_QUOTA_EXCEEDED"),
            AttachmentError::UploadIncomplete { .. } => Some("ATTACHMENT_UPLOAD_INCOMPLETE"),
            AttachmentError::PathRejected { .. } => Some("ATTACHMENT_PATH_REJECTED"),
            _ => None,
        }
    }

    /// Whether the caller's input is malformed (a face answers invalid params).
    pub fn is_invalid_params(&self) -> bool {
        matches!(
            self,
            AttachmentError::InvalidFileName { .. }
                | AttachmentError::InvalidSha256
                | AttachmentError::InvalidSize
                | AttachmentError::EmptyChunk
                | AttachmentError::ChunkOutOfOrder { .. }
                | AttachmentError::ChunkConflict { .. }
                | AttachmentError::NotUploading { .. }
                | AttachmentError::TooManyForTurn { .. }
                | AttachmentError::DuplicateInTurn { .. }
        )
    }

    /// Whether the same call may succeed later without change (a slot frees up when an
    /// attachment is released or expires).
    pub fn is_retryable(&self) -> bool {
        matches!(self, AttachmentError::QuotaExceeded { .. })
    }

    fn storage(action: &'static str) -> impl FnOnce(io::Error) -> AttachmentError {
        move |source| AttachmentError::Storage { action, source }
    }
}

/// The display name of a file name: surrounding white space trimmed, then control characters,
/// bidirectional-text controls and path separators replaced by `_`, at most 255 UTF-16 code
/// units, never empty ([`FALLBACK_DISPLAY_NAME`]).
pub fn display_name(file_name: &str) -> String {
    let replaced: String = file_name
        .trim()
        .chars()
        .map(|c| {
            if c.is_control() || c == '/' || c == '\\' || is_bidi_control(c) {
                '_'
            } else {
                c
            }
        })
        .collect();
    let mut name = String::new();
    let mut units = 0;
    for c in replaced.chars() {
        units += c.len_utf16();
        if units > MAX_FILE_NAME_UNITS {
            break;
        }
        name.push(c);
    }
    let name = name.trim_end();
    if name.is_empty() {
        FALLBACK_DISPLAY_NAME.to_owned()
    } else {
        name.to_owned()
    }
}

/// Characters that reorder text around them, so a name could show another extension than it
/// has.
fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{061C}' | '\u{200E}' | '\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2066}'..='\u{2069}')
}

/// The extension of a file name's last component, when it has a stem.
fn extension(file_name: &str) -> Option<&str> {
    let last = file_name.rsplit(['/', '\\']).next()?;
    let (stem, extension) = last.rsplit_once('.')?;
    (!stem.is_empty() && !extension.is_empty()).then_some(extension)
}

fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64 && text.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(digest.len() * 2);
    for byte in digest {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

/// The store. Cheap to clone: clones share the attachments. Each attachment belongs to the
/// thread it was staged for; any other thread gets `NotFound` for it.
#[derive(Debug, Clone)]
pub struct AttachmentStore {
    inner: Arc<Inner>,
}

#[derive(Debug)]
struct Inner {
    spool: PathBuf,
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

/// What a commit found.
enum Committing {
    Upload(Arc<Mutex<Upload>>),
    Done(AttachmentDescriptor),
}

#[derive(Debug, Clone, Copy)]
struct LastChunk {
    sequence: u64,
    offset: u64,
    len: u64,
}

impl AttachmentStore {
    /// A store with its content in `spool_dir` (created if missing, owner-only on Unix) and the
    /// system clock. Spool files left by an earlier store in that directory are removed: their
    /// attachments died with it.
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
        let spool = spool_dir.into();
        create_spool_dir(&spool)
            .map_err(AttachmentError::storage("creating the spool directory"))?;
        remove_leftovers(&spool)
            .map_err(AttachmentError::storage("clearing the spool directory"))?;
        let ttl_ms = u64::try_from(limits.ttl.as_millis()).unwrap_or(u64::MAX);
        Ok(AttachmentStore {
            inner: Arc::new(Inner {
                spool,
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

    fn stage(&self, thread_id: String, request: StageRequest) -> Result<Staged, AttachmentError> {
        let media_type = self.check(&request)?;
        let attachment_id = uuid::Uuid::new_v4().to_string();
        let created_at_ms = self.clock.now_ms();
        let descriptor = AttachmentDescriptor {
            attachment_id: attachment_id.clone(),
            display_name: display_name(&request.file_name),
            file_name: request.file_name,
            media_type,
            bytes: request.bytes,
            sha256: request.sha256,
            source: request.source.kind(),
            created_at_ms,
        };
        let expired = {
            let mut entries = self.lock();
            let expired = self.take_expired(&mut entries);
            if entries.len() >= self.limits.max_retained {
                drop(entries);
                self.remove_files(&expired);
                return Err(AttachmentError::QuotaExceeded {
                    max: self.limits.max_retained,
                });
            }
            entries.insert(
                attachment_id.clone(),
                Entry {
                    thread_id,
                    descriptor: descriptor.clone(),
                    since_ms: created_at_ms,
                    phase: Phase::Reserved,
                },
            );
            expired
        };
        self.remove_files(&expired);

        let path = self.path_of(&attachment_id);
        let filled = match &request.source {
            StageSource::Chunks => create_spool_file(&path)
                .map(drop)
                .map_err(AttachmentError::storage("creating a spool file")),
            StageSource::LocalPath(source) => copy_local(source, &path, self.limits.max_bytes)
                .and_then(|(bytes, sha256)| {
                    if bytes == descriptor.bytes && sha256 == descriptor.sha256 {
                        Ok(())
                    } else {
                        self.remove_files(std::slice::from_ref(&path));
                        Err(AttachmentError::HashMismatch {
                            declared: descriptor.sha256.clone(),
                            actual: sha256,
                        })
                    }
                }),
        };

        let mut entries = self.lock();
        if let Err(error) = filled {
            entries.remove(&attachment_id);
            return Err(error);
        }
        let Some(entry) = entries.get_mut(&attachment_id) else {
            // Only this call knows the id, and nothing removes a reserved entry.
            return Err(not_found(&attachment_id));
        };
        Ok(match request.source {
            StageSource::Chunks => {
                entry.phase = Phase::Uploading(Arc::new(Mutex::new(Upload {
                    received: 0,
                    next_sequence: 0,
                    hasher: Sha256::new(),
                    last: None,
                    end: UploadEnd::Open,
                })));
                Staged {
                    attachment_id,
                    state: AttachmentState::Staged,
                    descriptor: None,
                }
            }
            StageSource::LocalPath(_) => {
                entry.phase = Phase::Committed;
                entry.since_ms = self.clock.now_ms();
                Staged {
                    attachment_id,
                    state: AttachmentState::Committed,
                    descriptor: Some(descriptor),
                }
            }
        })
    }

    /// The checks of a stage that need neither the map nor the disk, in the order a caller
    /// meets them: the form of the input, the size limit, the media type, its extension, then
    /// the form of a local path.
    fn check(&self, request: &StageRequest) -> Result<MediaType, AttachmentError> {
        let units = request.file_name.encode_utf16().count();
        if units == 0 || units > MAX_FILE_NAME_UNITS {
            return Err(AttachmentError::InvalidFileName { units });
        }
        if !is_sha256_hex(&request.sha256) {
            return Err(AttachmentError::InvalidSha256);
        }
        if request.bytes == 0 {
            return Err(AttachmentError::InvalidSize);
        }
        if request.bytes > self.limits.max_bytes {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: request.bytes,
                max: self.limits.max_bytes,
            });
        }
        let unsupported = |reason| AttachmentError::TypeUnsupported {
            media_type: request.media_type.clone(),
            file_name: request.file_name.clone(),
            reason,
        };
        let media_type = MediaType::parse(&request.media_type)
            .filter(|t| self.limits.media_types.contains(t))
            .ok_or_else(|| unsupported(TypeRejection::MediaType))?;
        let agrees = extension(&request.file_name).is_some_and(|found| {
            media_type
                .extensions()
                .iter()
                .any(|known| known.eq_ignore_ascii_case(found))
        });
        if !agrees {
            return Err(unsupported(TypeRejection::Extension));
        }
        if let StageSource::LocalPath(path) = &request.source
            && !path.is_absolute()
        {
            return Err(AttachmentError::PathRejected {
                path: path.clone(),
                reason: PathRejection::NotAbsolute,
            });
        }
        Ok(media_type)
    }

    fn upload_of(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<(Arc<Mutex<Upload>>, u64), AttachmentError> {
        self.with_entry(thread_id, attachment_id, |entries| {
            let entry = entries
                .get(attachment_id)
                .ok_or_else(|| not_found(attachment_id))?;
            match &entry.phase {
                Phase::Uploading(upload) => Ok((Arc::clone(upload), entry.descriptor.bytes)),
                Phase::Committed => Err(AttachmentError::NotUploading {
                    attachment_id: attachment_id.to_owned(),
                }),
                Phase::Reserved => Err(not_found(attachment_id)),
            }
        })
    }

    fn chunk(
        &self,
        thread_id: &str,
        attachment_id: &str,
        sequence: u64,
        data: &[u8],
    ) -> Result<ChunkProgress, AttachmentError> {
        let (upload, declared) = self.upload_of(thread_id, attachment_id)?;
        let mut upload = upload.lock().unwrap_or_else(PoisonError::into_inner);
        // Committed or discarded since the entry was looked up?
        match upload.end {
            UploadEnd::Open => {}
            UploadEnd::Committed => {
                return Err(AttachmentError::NotUploading {
                    attachment_id: attachment_id.to_owned(),
                });
            }
            UploadEnd::Discarded => return Err(not_found(attachment_id)),
        }
        let len = u64::try_from(data.len()).unwrap_or(u64::MAX);
        let path = self.path_of(attachment_id);
        let progress = |upload: &Upload| ChunkProgress {
            received_bytes: upload.received,
            next_sequence: upload.next_sequence,
        };
        if let Some(last) = upload.last
            && last.sequence == sequence
        {
            return if last.len == len && same_bytes_at(&path, last.offset, data, attachment_id)? {
                Ok(progress(&upload))
            } else {
                Err(AttachmentError::ChunkConflict { sequence })
            };
        }
        if sequence != upload.next_sequence {
            return Err(AttachmentError::ChunkOutOfOrder {
                expected: upload.next_sequence,
                got: sequence,
            });
        }
        if data.is_empty() {
            return Err(AttachmentError::EmptyChunk);
        }
        if len > self.limits.max_chunk_bytes {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Chunk,
                bytes: len,
                max: self.limits.max_chunk_bytes,
            });
        }
        let total = upload.received.saturating_add(len);
        if total > declared {
            return Err(AttachmentError::TooLarge {
                limit: SizeLimit::Declared,
                bytes: total,
                max: declared,
            });
        }
        write_at(&path, upload.received, data, attachment_id)?;
        upload.hasher.update(data);
        upload.last = Some(LastChunk {
            sequence,
            offset: upload.received,
            len,
        });
        upload.received = total;
        upload.next_sequence += 1;
        Ok(progress(&upload))
    }

    fn commit(
        &self,
        thread_id: &str,
        attachment_id: &str,
    ) -> Result<AttachmentDescriptor, AttachmentError> {
        let found = self.with_entry(thread_id, attachment_id, |entries| {
            let entry = entries
                .get(attachment_id)
                .ok_or_else(|| not_found(attachment_id))?;
            match &entry.phase {
                Phase::Uploading(upload) => Ok(Committing::Upload(Arc::clone(upload))),
                Phase::Committed => Ok(Committing::Done(entry.descriptor.clone())),
                Phase::Reserved => Err(not_found(attachment_id)),
            }
        })?;
        let upload = match found {
            Committing::Upload(upload) => upload,
            Committing::Done(descriptor) => return Ok(descriptor),
        };
        let mut upload = upload.lock().unwrap_or_else(PoisonError::into_inner);
        if upload.end != UploadEnd::Open {
            // Another commit finished first: answer as a repeated commit.
            drop(upload);
            return self.with_entry(thread_id, attachment_id, |entries| {
                entries
                    .get(attachment_id)
                    .filter(|entry| matches!(entry.phase, Phase::Committed))
                    .map(|entry| entry.descriptor.clone())
                    .ok_or_else(|| not_found(attachment_id))
            });
        }
        let mut entries = self.lock();
        let Some(entry) = entries.get_mut(attachment_id) else {
            return Err(not_found(attachment_id));
        };
        if upload.received != entry.descriptor.bytes {
            return Err(AttachmentError::UploadIncomplete {
                received: upload.received,
                declared: entry.descriptor.bytes,
            });
        }
        let actual = hex(&upload.hasher.clone().finalize());
        if actual != entry.descriptor.sha256 {
            upload.end = UploadEnd::Discarded;
            let declared = entry.descriptor.sha256.clone();
            entries.remove(attachment_id);
            drop(entries);
            self.remove_files(&[self.path_of(attachment_id)]);
            return Err(AttachmentError::HashMismatch { declared, actual });
        }
        upload.end = UploadEnd::Committed;
        entry.phase = Phase::Committed;
        entry.since_ms = self.clock.now_ms();
        Ok(entry.descriptor.clone())
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
    }
}

fn not_found(attachment_id: &str) -> AttachmentError {
    AttachmentError::NotFound {
        attachment_id: attachment_id.to_owned(),
    }
}

fn create_spool_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Removes the spool files (`<uuid>.attachment`) in `dir`, and nothing else.
fn remove_leftovers(dir: &Path) -> io::Result<()> {
    for item in fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name();
        let is_spool_file = name
            .to_str()
            .and_then(|name| name.strip_suffix(SPOOL_SUFFIX))
            .is_some_and(|stem| uuid::Uuid::parse_str(stem).is_ok());
        if is_spool_file && item.file_type()?.is_file() {
            fs::remove_file(item.path())?;
        }
    }
    Ok(())
}

fn create_spool_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Writes a chunk at `offset` of an existing spool file; on failure the file is cut back to
/// `offset`, so a refused chunk leaves nothing behind.
fn write_at(
    path: &Path,
    offset: u64,
    data: &[u8],
    attachment_id: &str,
) -> Result<(), AttachmentError> {
    let mut file = match OpenOptions::new().write(true).open(path) {
        Ok(file) => file,
        // Released or expired while this chunk waited.
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(not_found(attachment_id));
        }
        Err(source) => {
            return Err(AttachmentError::Storage {
                action: "opening a spool file",
                source,
            });
        }
    };
    let written = file
        .seek(SeekFrom::Start(offset))
        .and_then(|_| file.write_all(data));
    if let Err(source) = written {
        if let Err(error) = file.set_len(offset) {
            tracing::warn!(path = %path.display(), %error, "cannot cut back a failed chunk");
        }
        return Err(AttachmentError::Storage {
            action: "writing a chunk",
            source,
        });
    }
    Ok(())
}

/// Whether the spool file holds `data` at `offset` (a repeated chunk).
fn same_bytes_at(
    path: &Path,
    offset: u64,
    data: &[u8],
    attachment_id: &str,
) -> Result<bool, AttachmentError> {
    let mut file = match File::open(path) {
        Ok(file) => file,
        Err(error) if error.kind() == io::ErrorKind::NotFound => {
            return Err(not_found(attachment_id));
        }
        Err(source) => {
            return Err(AttachmentError::Storage {
                action: "opening a spool file",
                source,
            });
        }
    };
    let mut stored = vec![0; data.len()];
    file.seek(SeekFrom::Start(offset))
        .and_then(|_| file.read_exact(&mut stored))
        .map_err(AttachmentError::storage("reading a chunk back"))?;
    Ok(stored == data)
}

/// Copies the local file `source` to the new spool file `target` with a bounded buffer,
/// hashing it on the way; its size and SHA-256. Nothing is left at `target` on failure.
fn copy_local(
    source: &Path,
    target: &Path,
    max_bytes: u64,
) -> Result<(u64, String), AttachmentError> {
    let rejected = |reason| AttachmentError::PathRejected {
        path: source.to_path_buf(),
        reason,
    };
    let too_large = |bytes| AttachmentError::TooLarge {
        limit: SizeLimit::Attachment,
        bytes,
        max: max_bytes,
    };
    let linked = fs::symlink_metadata(source).map_err(|_| rejected(PathRejection::Unreadable))?;
    if linked.file_type().is_symlink() {
        return Err(rejected(PathRejection::Symlink));
    }
    if !linked.is_file() {
        return Err(rejected(PathRejection::NotRegularFile));
    }
    if linked.len() > max_bytes {
        return Err(too_large(linked.len()));
    }
    let mut input = File::open(source).map_err(|_| rejected(PathRejection::Unreadable))?;
    let opened = input
        .metadata()
        .map_err(|_| rejected(PathRejection::Unreadable))?;
    if !opened.is_file() {
        return Err(rejected(PathRejection::NotRegularFile));
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt as _;
        if (opened.dev(), opened.ino()) != (linked.dev(), linked.ino()) {
            return Err(rejected(PathRejection::Changed));
        }
    }
    let mut output =
        create_spool_file(target).map_err(AttachmentError::storage("creating a spool file"))?;
    let copied = copy_hashing(&mut input, &mut output, max_bytes, &rejected, &too_large);
    if copied.is_err()
        && let Err(error) = fs::remove_file(target)
    {
        tracing::warn!(path = %target.display(), %error, "cannot remove a failed copy");
    }
    copied
}

fn copy_hashing(
    input: &mut File,
    output: &mut File,
    max_bytes: u64,
    rejected: &dyn Fn(PathRejection) -> AttachmentError,
    too_large: &dyn Fn(u64) -> AttachmentError,
) -> Result<(u64, String), AttachmentError> {
    let mut hasher = Sha256::new();
    let mut buffer = vec![0; COPY_BUFFER_BYTES];
    let mut total: u64 = 0;
    loop {
        let read = match input.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
            Err(_) => return Err(rejected(PathRejection::Unreadable)),
        };
        total = total.saturating_add(u64::try_from(read).unwrap_or(u64::MAX));
        // The file grew since it was lstat'ed.
        if total > max_bytes {
            return Err(too_large(total));
        }
        let chunk = &buffer[..read];
        hasher.update(chunk);
        output
            .write_all(chunk)
            .map_err(AttachmentError::storage("writing a spool file"))?;
    }
    Ok((total, hex(&hasher.finalize())))
}
