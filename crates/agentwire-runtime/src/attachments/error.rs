//! Why the attachment store refused a call: [`AttachmentError`] with its stable codes, and the
//! reasons a size, media type or local path was refused. Faces map the variants onto their own
//! error registries.

use std::fmt;
use std::io;
use std::path::PathBuf;

/// Which size limit an attachment broke.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SizeLimit {
    /// [`AttachmentLimits::max_bytes`], by the declared or the actual size.
    ///
    /// [`AttachmentLimits::max_bytes`]: super::AttachmentLimits::max_bytes
    Attachment,
    /// [`AttachmentLimits::max_chunk_bytes`], by one chunk.
    ///
    /// [`AttachmentLimits::max_chunk_bytes`]: super::AttachmentLimits::max_chunk_bytes
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
/// [`is_invalid_params`](Self::is_invalid_params) says which variants are the caller's malformed
/// input, and [`Storage`](Self::Storage) is the store's own failure.
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

    pub(super) fn storage(action: &'static str) -> impl FnOnce(io::Error) -> AttachmentError {
        move |source| AttachmentError::Storage { action, source }
    }
}

pub(super) fn not_found(attachment_id: &str) -> AttachmentError {
    AttachmentError::NotFound {
        attachment_id: attachment_id.to_owned(),
    }
}
