//! What the attachment store speaks in: the media types it knows, its limits, a stage request
//! and where its content comes from, and the descriptor, state and progress it answers with.

use std::fmt;
use std::path::PathBuf;
use std::time::Duration;

use super::{
    DEFAULT_MAX_ATTACHMENT_BYTES, DEFAULT_MAX_CHUNK_BYTES, DEFAULT_MAX_RETAINED,
    DEFAULT_MAX_TURN_ATTACHMENTS, DEFAULT_TTL,
};
use crate::event::AttachmentPart;

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
    /// The sanitised name shown to people ([`display_name`](super::display_name)).
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
