//! The attachment store: staging from a local path and in chunks, verification at stage and at
//! commit, the quota, expiry on an injected clock, what a turn may name, and the error codes.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use agentwire_runtime::attachments::{
    DEFAULT_MAX_ATTACHMENT_BYTES, PathRejection, SizeLimit, TypeRejection, display_name,
};
use agentwire_runtime::*;
use sha2::{Digest as _, Sha256};

const THREAD: &str = "thread-a";
const OTHER_THREAD: &str = "thread-b";
const START_MS: u64 = 1_700_000_000_000;
const PNG: &[u8] = b"\x89PNG\r\n\x1a\n0123456789";

#[derive(Debug)]
struct ManualClock(AtomicU64);

impl ManualClock {
    fn advance(&self, ms: u64) {
        self.0.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Clock for ManualClock {
    fn now_ms(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

struct Fixture {
    store: AttachmentStore,
    clock: Arc<ManualClock>,
    spool: PathBuf,
    files: tempfile::TempDir,
    _spool_dir: tempfile::TempDir,
}

impl Fixture {
    fn new(limits: AttachmentLimits) -> Fixture {
        let spool_dir = tempfile::tempdir().unwrap();
        let spool = spool_dir.path().join("spool");
        let clock = Arc::new(ManualClock(AtomicU64::new(START_MS)));
        let store = AttachmentStore::with_clock(&spool, limits, clock.clone()).unwrap();
        Fixture {
            store,
            clock,
            spool,
            files: tempfile::tempdir().unwrap(),
            _spool_dir: spool_dir,
        }
    }

    fn standard() -> Fixture {
        Fixture::new(AttachmentLimits::default())
    }

    /// Writes a file the host could name as a local path.
    fn local_file(&self, name: &str, data: &[u8]) -> PathBuf {
        let path = self.files.path().join(name);
        std::fs::write(&path, data).unwrap();
        path
    }

    /// The spool files the store holds, in its own directory of the spool directory.
    fn spool_files(&self) -> usize {
        let mut own = std::fs::read_dir(&self.spool).unwrap();
        let own = own.next().unwrap().unwrap().path();
        std::fs::read_dir(own)
            .unwrap()
            .filter(|item| {
                item.as_ref()
                    .unwrap()
                    .file_name()
                    .to_str()
                    .unwrap()
                    .ends_with(".attachment")
            })
            .count()
    }

    async fn stage_chunks(&self, thread: &str, name: &str, data: &[u8]) -> String {
        let staged = self
            .store
            .stage(thread, chunks(name, "image/png", data))
            .await
            .unwrap();
        assert_eq!(staged.state, AttachmentState::Staged);
        staged.attachment_id
    }

    async fn committed(&self, thread: &str, data: &[u8]) -> AttachmentDescriptor {
        let id = self.stage_chunks(thread, "diagram.png", data).await;
        self.store.chunk(thread, &id, 0, data).await.unwrap();
        self.store.commit(thread, &id).await.unwrap()
    }
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data)
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect()
}

fn chunks(file_name: &str, media_type: &str, data: &[u8]) -> StageRequest {
    StageRequest {
        file_name: file_name.into(),
        media_type: media_type.into(),
        bytes: data.len() as u64,
        sha256: sha256(data),
        source: StageSource::Chunks,
    }
}

fn local(file_name: &str, media_type: &str, data: &[u8], path: &Path) -> StageRequest {
    StageRequest {
        source: StageSource::LocalPath(path.to_path_buf()),
        ..chunks(file_name, media_type, data)
    }
}

fn content(file: &mut std::fs::File) -> Vec<u8> {
    let mut data = Vec::new();
    file.read_to_end(&mut data).unwrap();
    data
}

fn assert_code(error: &AttachmentError, code: &str) {
    assert_eq!(error.code(), code, "{error:?}");
}

#[tokio::test]
async fn a_local_file_is_copied_verified_and_committed_at_stage() {
    let fx = Fixture::standard();
    let path = fx.local_file("diagram.png", PNG);
    let staged = fx
        .store
        .stage(THREAD, local("diagram.png", "image/png", PNG, &path))
        .await
        .unwrap();
    assert_eq!(staged.state, AttachmentState::Committed);
    let descriptor = staged
        .descriptor
        .expect("a committed stage carries its descriptor");
    assert_eq!(
        descriptor,
        AttachmentDescriptor {
            attachment_id: staged.attachment_id.clone(),
            file_name: "diagram.png".into(),
            display_name: "diagram.png".into(),
            media_type: MediaType::Png,
            bytes: PNG.len() as u64,
            sha256: sha256(PNG),
            source: AttachmentSource::LocalPath,
            created_at_ms: START_MS,
        }
    );
    assert!(uuid::Uuid::parse_str(&staged.attachment_id).is_ok());

    // The copy is the store's: the original may go.
    std::fs::remove_file(&path).unwrap();
    let (opened, mut file) = fx.store.open(THREAD, &staged.attachment_id).await.unwrap();
    assert_eq!(opened, descriptor);
    assert_eq!(content(&mut file), PNG);
    assert_eq!(fx.spool_files(), 1);
    assert_eq!(
        fx.store
            .commit(THREAD, &staged.attachment_id)
            .await
            .unwrap(),
        descriptor
    );
}

#[tokio::test]
async fn a_local_path_must_be_an_absolute_regular_file_that_is_no_symlink() {
    let fx = Fixture::standard();
    let target = fx.local_file("real.png", PNG);
    let link = fx.files.path().join("link.png");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let directory = fx.files.path().join("folder.png");
    std::fs::create_dir(&directory).unwrap();
    let cases = [
        (PathBuf::from("real.png"), PathRejection::NotAbsolute),
        (link, PathRejection::Symlink),
        (directory, PathRejection::NotRegularFile),
        (
            fx.files.path().join("missing.png"),
            PathRejection::Unreadable,
        ),
    ];
    for (path, expected) in cases {
        let error = fx
            .store
            .stage(THREAD, local("real.png", "image/png", PNG, &path))
            .await
            .unwrap_err();
        assert_code(&error, "runtime.attachment.path-rejected");
        match &error {
            AttachmentError::PathRejected { path: p, reason } => {
                assert_eq!((p, *reason), (&path, expected));
            }
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(fx.store.retained().await.unwrap(), 0);
    assert_eq!(fx.spool_files(), 0);
}

#[tokio::test]
async fn a_local_file_unlike_its_declaration_is_a_hash_mismatch_and_kept_nowhere() {
    let fx = Fixture::standard();
    let path = fx.local_file("diagram.png", PNG);
    let mut wrong_hash = local("diagram.png", "image/png", PNG, &path);
    wrong_hash.sha256 = sha256(b"something else");
    let error = fx.store.stage(THREAD, wrong_hash).await.unwrap_err();
    assert_code(&error, "runtime.attachment.hash-mismatch");
    assert!(
        matches!(&error, AttachmentError::HashMismatch { declared, actual }
            if *declared == sha256(b"something else") && *actual == sha256(PNG)),
        "{error:?}"
    );

    let mut wrong_size = local("diagram.png", "image/png", PNG, &path);
    wrong_size.bytes += 1;
    let error = fx.store.stage(THREAD, wrong_size).await.unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.hash-mismatch");

    assert_eq!(fx.store.retained().await.unwrap(), 0);
    assert_eq!(fx.spool_files(), 0);
}

#[tokio::test]
async fn a_local_file_over_the_limit_is_too_large_by_declaration_or_by_content() {
    let fx = Fixture::new(AttachmentLimits {
        max_bytes: 8,
        ..AttachmentLimits::default()
    });
    let big = fx.local_file("big.png", &[7; 9]);
    let error = fx
        .store
        .stage(THREAD, local("big.png", "image/png", &[7; 9], &big))
        .await
        .unwrap_err();
    assert_code(&error, "runtime.attachment.too-large");
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: 9,
                max: 8
            }
        ),
        "{error:?}"
    );

    // Declared within the limit, the file itself is not.
    let mut understated = local("big.png", "image/png", &[7; 9], &big);
    understated.bytes = 4;
    let error = fx.store.stage(THREAD, understated).await.unwrap_err();
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: 9,
                max: 8
            }
        ),
        "{error:?}"
    );
    assert_eq!(fx.spool_files(), 0);
}

#[tokio::test]
async fn the_protocol_limit_of_16_mib_is_accepted_exactly_from_a_local_path() {
    let fx = Fixture::standard();
    let data = vec![0x5a; DEFAULT_MAX_ATTACHMENT_BYTES as usize];
    let path = fx.local_file("big.txt", &data);
    let staged = fx
        .store
        .stage(THREAD, local("big.txt", "text/plain", &data, &path))
        .await
        .unwrap();
    assert_eq!(staged.descriptor.unwrap().bytes, 16_777_216);

    let over = fx.local_file("over.txt", &[0x5a; 16_777_217]);
    let request = StageRequest {
        file_name: "over.txt".into(),
        media_type: "text/plain".into(),
        bytes: 16_777_216,
        sha256: "0".repeat(64),
        source: StageSource::LocalPath(over),
    };
    let error = fx.store.stage(THREAD, request).await.unwrap_err();
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: 16_777_217,
                max: 16_777_216
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn chunks_are_appended_in_order_then_committed() {
    let fx = Fixture::standard();
    let data = b"0123456789";
    let id = fx.stage_chunks(THREAD, "diagram.png", data).await;
    assert_eq!(fx.spool_files(), 1);
    let mut progress = Vec::new();
    for (sequence, part) in [&data[..4], &data[4..8], &data[8..]]
        .into_iter()
        .enumerate()
    {
        progress.push(
            fx.store
                .chunk(THREAD, &id, sequence as u64, part)
                .await
                .unwrap(),
        );
    }
    assert_eq!(
        progress,
        [
            ChunkProgress {
                received_bytes: 4,
                next_sequence: 1
            },
            ChunkProgress {
                received_bytes: 8,
                next_sequence: 2
            },
            ChunkProgress {
                received_bytes: 10,
                next_sequence: 3
            },
        ]
    );
    fx.clock.advance(5);
    let descriptor = fx.store.commit(THREAD, &id).await.unwrap();
    assert_eq!(
        descriptor,
        AttachmentDescriptor {
            attachment_id: id.clone(),
            file_name: "diagram.png".into(),
            display_name: "diagram.png".into(),
            media_type: MediaType::Png,
            bytes: 10,
            sha256: sha256(data),
            source: AttachmentSource::Chunks,
            created_at_ms: START_MS,
        }
    );
    let (_, mut file) = fx.store.open(THREAD, &id).await.unwrap();
    assert_eq!(content(&mut file), data);
}

#[tokio::test]
async fn the_last_chunk_sent_again_with_the_same_data_is_answered_as_before() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abcdef").await;
    let first = fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap();
    assert_eq!(fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap(), first);

    let error = fx.store.chunk(THREAD, &id, 0, b"abd").await.unwrap_err();
    assert_code(&error, "runtime.attachment.chunk-conflict");
    assert!(error.is_invalid_params());
    assert!(matches!(
        error,
        AttachmentError::ChunkConflict { sequence: 0 }
    ));

    let error = fx.store.chunk(THREAD, &id, 0, b"ab").await.unwrap_err();
    assert!(matches!(
        error,
        AttachmentError::ChunkConflict { sequence: 0 }
    ));

    fx.store.chunk(THREAD, &id, 1, b"def").await.unwrap();
    assert_eq!(fx.store.commit(THREAD, &id).await.unwrap().bytes, 6);
}

#[tokio::test]
async fn a_chunk_out_of_order_is_refused_and_changes_nothing() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abcdef").await;
    let error = fx.store.chunk(THREAD, &id, 1, b"abc").await.unwrap_err();
    assert_code(&error, "runtime.attachment.chunk-out-of-order");
    assert!(error.is_invalid_params());
    assert!(matches!(
        error,
        AttachmentError::ChunkOutOfOrder {
            expected: 0,
            got: 1
        }
    ));
    fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap();
    let error = fx.store.chunk(THREAD, &id, 2, b"def").await.unwrap_err();
    assert!(matches!(
        error,
        AttachmentError::ChunkOutOfOrder {
            expected: 1,
            got: 2
        }
    ));
    let progress = fx.store.chunk(THREAD, &id, 1, b"def").await.unwrap();
    assert_eq!(
        progress,
        ChunkProgress {
            received_bytes: 6,
            next_sequence: 2
        }
    );
}

#[tokio::test]
async fn a_chunk_over_the_chunk_limit_is_too_large_and_changes_nothing() {
    let fx = Fixture::new(AttachmentLimits {
        max_chunk_bytes: 4,
        ..AttachmentLimits::default()
    });
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abcdef").await;
    let error = fx.store.chunk(THREAD, &id, 0, b"abcde").await.unwrap_err();
    assert_code(&error, "runtime.attachment.too-large");
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Chunk,
                bytes: 5,
                max: 4
            }
        ),
        "{error:?}"
    );
    let error = fx.store.chunk(THREAD, &id, 0, b"").await.unwrap_err();
    assert_code(&error, "runtime.attachment.empty-chunk");
    let progress = fx.store.chunk(THREAD, &id, 0, b"abcd").await.unwrap();
    assert_eq!(progress.received_bytes, 4);
}

#[tokio::test]
async fn chunks_over_the_declared_size_are_too_large_and_the_chunk_is_not_kept() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abcdef").await;
    fx.store.chunk(THREAD, &id, 0, b"abcd").await.unwrap();
    let error = fx.store.chunk(THREAD, &id, 1, b"efgh").await.unwrap_err();
    assert_code(&error, "runtime.attachment.too-large");
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Declared,
                bytes: 8,
                max: 6
            }
        ),
        "{error:?}"
    );
    fx.store.chunk(THREAD, &id, 1, b"ef").await.unwrap();
    let (_, mut file) = {
        fx.store.commit(THREAD, &id).await.unwrap();
        fx.store.open(THREAD, &id).await.unwrap()
    };
    assert_eq!(content(&mut file), b"abcdef");
}

#[tokio::test]
async fn a_commit_before_every_byte_arrived_is_incomplete_and_stays_staged() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abcdef").await;
    fx.store.chunk(THREAD, &id, 0, b"abcd").await.unwrap();
    let error = fx.store.commit(THREAD, &id).await.unwrap_err();
    assert_code(&error, "runtime.attachment.upload-incomplete");
    assert!(matches!(
        error,
        AttachmentError::UploadIncomplete {
            received: 4,
            declared: 6
        }
    ));
    fx.store.chunk(THREAD, &id, 1, b"ef").await.unwrap();
    assert_eq!(fx.store.commit(THREAD, &id).await.unwrap().bytes, 6);
}

#[tokio::test]
async fn a_commit_of_other_content_is_a_hash_mismatch_and_the_data_is_discarded() {
    let fx = Fixture::standard();
    let mut request = chunks("diagram.png", "image/png", b"abcdef");
    request.sha256 = sha256(b"ABCDEF");
    let id = fx.store.stage(THREAD, request).await.unwrap().attachment_id;
    fx.store.chunk(THREAD, &id, 0, b"abcdef").await.unwrap();
    assert_eq!(fx.spool_files(), 1);
    let error = fx.store.commit(THREAD, &id).await.unwrap_err();
    assert_code(&error, "runtime.attachment.hash-mismatch");
    assert!(
        matches!(&error, AttachmentError::HashMismatch { declared, actual }
            if *declared == sha256(b"ABCDEF") && *actual == sha256(b"abcdef")),
        "{error:?}"
    );
    assert_eq!(fx.spool_files(), 0);
    assert_eq!(fx.store.retained().await.unwrap(), 0);
    let error = fx.store.commit(THREAD, &id).await.unwrap_err();
    assert_code(&error, "runtime.attachment.not-found");
    let error = fx.store.chunk(THREAD, &id, 1, b"g").await.unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.not-found");
}

#[tokio::test]
async fn a_repeated_commit_answers_the_same_descriptor_and_takes_no_more_chunks() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "diagram.png", b"abc").await;
    fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap();
    let first = fx.store.commit(THREAD, &id).await.unwrap();
    fx.clock.advance(1_000);
    assert_eq!(fx.store.commit(THREAD, &id).await.unwrap(), first);
    let error = fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap_err();
    assert_code(&error, "runtime.attachment.not-uploading");
    assert!(error.is_invalid_params());
}

#[tokio::test]
async fn media_types_are_the_accepted_ones_and_agree_with_the_extension() {
    let fx = Fixture::new(AttachmentLimits {
        media_types: vec![MediaType::Png, MediaType::Jpeg, MediaType::Markdown],
        ..AttachmentLimits::default()
    });
    let refused = [
        ("diagram.bmp", "image/bmp", TypeRejection::MediaType),
        ("notes.txt", "text/plain", TypeRejection::MediaType),
        ("diagram.png", "image/jpeg", TypeRejection::Extension),
        ("photo.jpg", "image/png", TypeRejection::Extension),
        ("diagram", "image/png", TypeRejection::Extension),
        (".png", "image/png", TypeRejection::Extension),
        ("diagram.png.exe", "image/png", TypeRejection::Extension),
    ];
    for (name, media_type, expected) in refused {
        let error = fx
            .store
            .stage(THREAD, chunks(name, media_type, b"abc"))
            .await
            .unwrap_err();
        assert_code(&error, "runtime.attachment.type-unsupported");
        match error {
            AttachmentError::TypeUnsupported {
                media_type: m,
                file_name,
                reason,
            } => assert_eq!(
                (m.as_str(), file_name.as_str(), reason),
                (media_type, name, expected)
            ),
            other => panic!("{other:?}"),
        }
    }
    for (name, media_type) in [
        ("photo.JPG", "image/jpeg"),
        ("photo.jpeg", "image/jpeg"),
        ("README.markdown", "text/markdown"),
        ("notes.md", "text/markdown"),
    ] {
        let staged = fx
            .store
            .stage(THREAD, chunks(name, media_type, b"abc"))
            .await;
        assert!(staged.is_ok(), "{name} {media_type}: {staged:?}");
    }
}

#[test]
fn every_media_type_has_its_name_and_extensions() {
    let table: Vec<(&str, &[&str])> = MediaType::ALL
        .into_iter()
        .map(|t| (t.as_str(), t.extensions()))
        .collect();
    assert_eq!(
        table,
        [
            ("image/png", &["png"][..]),
            ("image/jpeg", &["jpg", "jpeg"][..]),
            ("image/gif", &["gif"][..]),
            ("image/webp", &["webp"][..]),
            ("application/pdf", &["pdf"][..]),
            ("text/plain", &["txt", "text", "log"][..]),
            ("text/markdown", &["md", "markdown"][..]),
        ]
    );
    for t in MediaType::ALL {
        assert_eq!(MediaType::parse(t.as_str()), Some(t));
    }
    assert_eq!(MediaType::parse("IMAGE/PNG"), None);
}

#[tokio::test]
async fn malformed_declarations_are_invalid_params_of_their_own_kind() {
    let fx = Fixture::standard();
    let stage = |request: StageRequest| fx.store.stage(THREAD, request);

    let mut upper = chunks("a.png", "image/png", b"abc");
    upper.sha256 = upper.sha256.to_uppercase();
    let error = stage(upper).await.unwrap_err();
    assert_code(&error, "runtime.attachment.invalid-sha256");
    assert!(error.is_invalid_params());

    let mut short = chunks("a.png", "image/png", b"abc");
    short.sha256.pop();
    assert_eq!(
        stage(short).await.unwrap_err().code(),
        "runtime.attachment.invalid-sha256"
    );

    let error = stage(chunks("", "image/png", b"abc")).await.unwrap_err();
    assert_code(&error, "runtime.attachment.invalid-file-name");
    assert!(matches!(
        error,
        AttachmentError::InvalidFileName { units: 0 }
    ));

    // 255 UTF-16 code units is the limit; an emoji counts two.
    let longest = format!("{}.png", "x".repeat(251));
    assert!(stage(chunks(&longest, "image/png", b"abc")).await.is_ok());
    let too_long = format!("{}\u{1F600}.png", "x".repeat(250));
    let error = stage(chunks(&too_long, "image/png", b"abc"))
        .await
        .unwrap_err();
    assert!(
        matches!(error, AttachmentError::InvalidFileName { units: 256 }),
        "{error:?}"
    );

    let mut empty = chunks("a.png", "image/png", b"");
    empty.sha256 = sha256(b"");
    let error = stage(empty).await.unwrap_err();
    assert_code(&error, "runtime.attachment.invalid-size");
    assert!(error.is_invalid_params());

    let mut declared_too_large = chunks("a.png", "image/png", b"abc");
    declared_too_large.bytes = DEFAULT_MAX_ATTACHMENT_BYTES + 1;
    let error = stage(declared_too_large).await.unwrap_err();
    assert!(
        matches!(
            error,
            AttachmentError::TooLarge {
                limit: SizeLimit::Attachment,
                bytes: 16_777_217,
                max: 16_777_216
            }
        ),
        "{error:?}"
    );
}

#[tokio::test]
async fn the_quota_counts_staged_and_committed_attachments_of_every_thread_until_released() {
    let fx = Fixture::new(AttachmentLimits {
        max_retained: 2,
        ..AttachmentLimits::default()
    });
    let staged = fx.stage_chunks(THREAD, "a.png", b"abc").await;
    // A stage that fails verification does not keep the slot it reserved.
    let path = fx.local_file("b.png", PNG);
    let mut unlike = local("b.png", "image/png", PNG, &path);
    unlike.sha256 = sha256(b"other");
    let error = fx.store.stage(THREAD, unlike).await.unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.hash-mismatch");
    let committed = fx.committed(OTHER_THREAD, b"def").await;
    for thread in [THREAD, OTHER_THREAD] {
        let error = fx
            .store
            .stage(thread, chunks("c.png", "image/png", b"ghi"))
            .await
            .unwrap_err();
        assert_code(&error, "runtime.attachment.quota-exceeded");
        assert!(matches!(error, AttachmentError::QuotaExceeded { max: 2 }));
        assert!(error.is_retryable());
    }
    assert_eq!(fx.store.retained().await.unwrap(), 2);

    // Only the owning thread releases, and only once.
    assert!(
        !fx.store
            .release(THREAD, &committed.attachment_id)
            .await
            .unwrap()
    );
    assert!(
        fx.store
            .release(OTHER_THREAD, &committed.attachment_id)
            .await
            .unwrap()
    );
    assert!(
        !fx.store
            .release(OTHER_THREAD, &committed.attachment_id)
            .await
            .unwrap()
    );
    assert_eq!(fx.spool_files(), 1);

    fx.stage_chunks(THREAD, "c.png", b"ghi").await;
    assert!(fx.store.release(THREAD, &staged).await.unwrap());
    assert_eq!(fx.store.retained().await.unwrap(), 1);
}

#[tokio::test]
async fn a_turn_names_committed_attachments_of_its_thread_in_order() {
    let fx = Fixture::standard();
    let first = fx.committed(THREAD, b"first").await;
    let path = fx.local_file("notes.md", b"# notes");
    let second = fx
        .store
        .stage(
            THREAD,
            local("  notes\n.md", "text/markdown", b"# notes", &path),
        )
        .await
        .unwrap()
        .descriptor
        .unwrap();
    let parts = fx
        .store
        .for_turn(THREAD, &[&second.attachment_id, &first.attachment_id])
        .await
        .unwrap();
    assert_eq!(
        parts,
        [
            AttachmentPart {
                attachment_id: second.attachment_id.clone(),
                media_type: "text/markdown".into(),
                bytes: 7,
                display_name: "notes_.md".into(),
            },
            AttachmentPart {
                attachment_id: first.attachment_id.clone(),
                media_type: "image/png".into(),
                bytes: 5,
                display_name: "diagram.png".into(),
            },
        ]
    );
    assert_eq!(fx.store.for_turn::<String>(THREAD, &[]).await.unwrap(), []);
    // Naming them keeps them retained.
    assert_eq!(fx.store.retained().await.unwrap(), 2);
}

#[tokio::test]
async fn a_turn_may_not_name_too_many_twice_uncommitted_foreign_released_or_expired() {
    let fx = Fixture::new(AttachmentLimits {
        ttl: Duration::from_millis(1_000),
        ..AttachmentLimits::default()
    });
    let good = fx.committed(THREAD, b"good").await.attachment_id;

    let nine: Vec<String> = (0..9).map(|_| good.clone()).collect();
    let error = fx.store.for_turn(THREAD, &nine).await.unwrap_err();
    assert_code(&error, "runtime.attachment.too-many-for-turn");
    assert!(error.is_invalid_params());
    assert!(matches!(
        error,
        AttachmentError::TooManyForTurn { count: 9, max: 8 }
    ));

    let error = fx
        .store
        .for_turn(THREAD, &[&good, &good])
        .await
        .unwrap_err();
    assert_code(&error, "runtime.attachment.duplicate-in-turn");

    let uncommitted = fx.stage_chunks(THREAD, "wip.png", b"wip").await;
    let error = fx
        .store
        .for_turn(THREAD, &[&good, &uncommitted])
        .await
        .unwrap_err();
    assert_code(&error, "runtime.attachment.not-committed");
    assert!(
        matches!(&error, AttachmentError::NotCommitted { attachment_id } if *attachment_id == uncommitted)
    );

    let foreign = fx.committed(OTHER_THREAD, b"foreign").await.attachment_id;
    let released = fx.committed(THREAD, b"released").await.attachment_id;
    assert!(fx.store.release(THREAD, &released).await.unwrap());
    for missing in [&foreign, &released, &"not-an-attachment".to_owned()] {
        let error = fx
            .store
            .for_turn(THREAD, &[&good, missing])
            .await
            .unwrap_err();
        assert_code(&error, "runtime.attachment.not-found");
        assert!(
            matches!(&error, AttachmentError::NotFound { attachment_id } if attachment_id == missing)
        );
    }

    fx.clock.advance(1_001);
    let error = fx.store.for_turn(THREAD, &[&good]).await.unwrap_err();
    assert!(
        matches!(&error, AttachmentError::NotFound { attachment_id } if *attachment_id == good)
    );
}

#[tokio::test]
async fn attachments_expire_a_ttl_after_stage_or_commit_and_their_files_go() {
    let fx = Fixture::new(AttachmentLimits {
        ttl: Duration::from_millis(1_000),
        max_retained: 3,
        ..AttachmentLimits::default()
    });
    let staged = fx.stage_chunks(THREAD, "staged.png", b"abc").await;
    let late = fx.stage_chunks(THREAD, "late.png", b"abc").await;
    fx.store.chunk(THREAD, &late, 0, b"abc").await.unwrap();
    fx.clock.advance(900);
    let committed = fx.store.commit(THREAD, &late).await.unwrap();
    assert_eq!(committed.created_at_ms, START_MS);

    // At exactly the ttl an attachment is still alive.
    fx.clock.advance(100);
    fx.store.chunk(THREAD, &staged, 0, b"abc").await.unwrap();
    assert_eq!(fx.store.sweep().await.unwrap(), 0);

    // The staged one is older than the ttl; the committed one counts from its commit.
    fx.clock.advance(1);
    let error = fx.store.commit(THREAD, &staged).await.unwrap_err();
    assert_code(&error, "runtime.attachment.not-found");
    assert_eq!(fx.spool_files(), 1);
    assert_eq!(fx.store.for_turn(THREAD, &[&late]).await.unwrap().len(), 1);

    fx.clock.advance(900);
    assert_eq!(fx.store.sweep().await.unwrap(), 1);
    assert_eq!(fx.spool_files(), 0);
    assert!(!fx.store.release(THREAD, &late).await.unwrap());
    assert_eq!(fx.store.retained().await.unwrap(), 0);
}

#[tokio::test]
async fn expired_attachments_free_the_quota_lazily() {
    let fx = Fixture::new(AttachmentLimits {
        ttl: Duration::from_millis(10),
        max_retained: 1,
        ..AttachmentLimits::default()
    });
    fx.stage_chunks(THREAD, "a.png", b"abc").await;
    fx.clock.advance(11);
    fx.stage_chunks(THREAD, "b.png", b"abc").await;
    assert_eq!(fx.spool_files(), 1);
}

#[tokio::test]
async fn another_thread_sees_none_of_the_attachment() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "a.png", b"abc").await;
    let error = fx
        .store
        .chunk(OTHER_THREAD, &id, 0, b"abc")
        .await
        .unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.not-found");
    let error = fx.store.commit(OTHER_THREAD, &id).await.unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.not-found");
    let error = fx.store.open(OTHER_THREAD, &id).await.unwrap_err();
    assert_eq!(error.code(), "runtime.attachment.not-found");
    assert!(!fx.store.release(OTHER_THREAD, &id).await.unwrap());
    fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap();
}

#[tokio::test]
async fn releasing_a_thread_releases_all_of_its_attachments() {
    let fx = Fixture::standard();
    fx.stage_chunks(THREAD, "a.png", b"abc").await;
    fx.committed(THREAD, b"def").await;
    let kept = fx.committed(OTHER_THREAD, b"ghi").await;
    assert_eq!(fx.store.release_thread(THREAD).await.unwrap(), 2);
    assert_eq!(fx.spool_files(), 1);
    assert_eq!(
        fx.store
            .for_turn(OTHER_THREAD, &[&kept.attachment_id])
            .await
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test]
async fn concurrent_commits_of_one_upload_agree() {
    let fx = Fixture::standard();
    let id = fx.stage_chunks(THREAD, "a.png", b"abc").await;
    fx.store.chunk(THREAD, &id, 0, b"abc").await.unwrap();
    let (a, b) = tokio::join!(fx.store.commit(THREAD, &id), fx.store.commit(THREAD, &id));
    assert_eq!(a.unwrap(), b.unwrap());
}

#[test]
fn display_names_are_sanitised_renderings_of_the_file_name() {
    let cases = [
        ("diagram.png", "diagram.png"),
        ("../etc/passwd.txt", ".._etc_passwd.txt"),
        ("C:\\Users\\me\\a.png", "C:_Users_me_a.png"),
        ("  spaced.png \t", "spaced.png"),
        ("line\nbreak\u{7f}.png", "line_break_.png"),
        ("invoice\u{202E}gnp.exe", "invoice_gnp.exe"),
        ("   ", "attachment"),
        ("", "attachment"),
        ("看看这张图.png", "看看这张图.png"),
    ];
    for (file_name, expected) in cases {
        assert_eq!(display_name(file_name), expected, "{file_name:?}");
    }
    let long = "y".repeat(300);
    assert_eq!(display_name(&long), "y".repeat(255));
}

#[test]
fn each_kind_has_its_own_code_and_says_whether_it_is_invalid_params() {
    let errors = [
        AttachmentError::NotFound {
            attachment_id: "a".into(),
        },
        AttachmentError::NotCommitted {
            attachment_id: "a".into(),
        },
        AttachmentError::TooLarge {
            limit: SizeLimit::Attachment,
            bytes: 2,
            max: 1,
        },
        AttachmentError::TypeUnsupported {
            media_type: "image/bmp".into(),
            file_name: "a.bmp".into(),
            reason: TypeRejection::MediaType,
        },
        AttachmentError::HashMismatch {
            declared: "0".repeat(64),
            actual: "1".repeat(64),
        },
        AttachmentError::QuotaExceeded { max: 16 },
        AttachmentError::UploadIncomplete {
            received: 1,
            declared: 2,
        },
        AttachmentError::PathRejected {
            path: "a".into(),
            reason: PathRejection::NotAbsolute,
        },
        AttachmentError::InvalidFileName { units: 0 },
        AttachmentError::InvalidSha256,
        AttachmentError::InvalidSize,
        AttachmentError::EmptyChunk,
        AttachmentError::ChunkOutOfOrder {
            expected: 0,
            got: 1,
        },
        AttachmentError::ChunkConflict { sequence: 0 },
        AttachmentError::NotUploading {
            attachment_id: "a".into(),
        },
        AttachmentError::TooManyForTurn { count: 9, max: 8 },
        AttachmentError::DuplicateInTurn {
            attachment_id: "a".into(),
        },
        AttachmentError::Storage {
            action: "testing",
            source: std::io::Error::other("disk"),
        },
    ];
    let table: Vec<(&str, bool)> = errors
        .iter()
        .map(|e| (e.code(), e.is_invalid_params()))
        .collect();
    assert_eq!(
        table,
        [
            ("runtime.attachment.not-found", false),
            ("runtime.attachment.not-committed", false),
            ("runtime.attachment.too-large", false),
            ("runtime.attachment.type-unsupported", false),
            ("runtime.attachment.hash-mismatch", false),
            ("runtime.attachment.quota-exceeded", false),
            ("runtime.attachment.upload-incomplete", false),
            ("runtime.attachment.path-rejected", false),
            ("runtime.attachment.invalid-file-name", true),
            ("runtime.attachment.invalid-sha256", true),
            ("runtime.attachment.invalid-size", true),
            ("runtime.attachment.empty-chunk", true),
            ("runtime.attachment.chunk-out-of-order", true),
            ("runtime.attachment.chunk-conflict", true),
            ("runtime.attachment.not-uploading", true),
            ("runtime.attachment.too-many-for-turn", true),
            ("runtime.attachment.duplicate-in-turn", true),
            ("runtime.attachment.storage", false),
        ]
    );
}

#[test]
fn a_new_store_clears_spool_files_left_behind_and_nothing_else() {
    let dir = tempfile::tempdir().unwrap();
    let leftover = dir
        .path()
        .join("00000000-0000-4000-8000-0000000000a1.attachment");
    let unrelated = dir.path().join("notes.attachment");
    std::fs::write(&leftover, b"old").unwrap();
    std::fs::write(&unrelated, b"keep").unwrap();
    // What stores that are gone left: their own directories, their locks free, one of them
    // still being set up when its store stopped.
    let gone = dir.path().join("00000000-0000-4000-8000-0000000000b2");
    let half = dir.path().join("00000000-0000-4000-8000-0000000000d4.new");
    for own in [&gone, &half] {
        std::fs::create_dir(own).unwrap();
        std::fs::write(own.join("lock"), b"").unwrap();
        std::fs::write(
            own.join("00000000-0000-4000-8000-0000000000c3.attachment"),
            b"old",
        )
        .unwrap();
    }
    let store = AttachmentStore::new(dir.path(), AttachmentLimits::default()).unwrap();
    assert!(!leftover.exists());
    assert!(!gone.exists());
    assert!(!half.exists());
    assert!(unrelated.exists());
    assert_eq!(store.limits(), &AttachmentLimits::default());
}

/// Two stores on one spool directory (runtimes of two processes on one state directory) keep
/// apart: a store starting leaves a live store's files alone, and a store that ends takes its
/// own directory with it.
#[tokio::test]
async fn stores_sharing_a_spool_directory_keep_apart() {
    let dir = tempfile::tempdir().unwrap();
    let first = AttachmentStore::new(dir.path(), AttachmentLimits::default()).unwrap();
    let staged = first
        .stage(THREAD, chunks("a.png", "image/png", b"0123456789"))
        .await
        .unwrap();
    let second = AttachmentStore::new(dir.path(), AttachmentLimits::default()).unwrap();
    first
        .chunk(THREAD, &staged.attachment_id, 0, b"0123456789")
        .await
        .unwrap();
    first.commit(THREAD, &staged.attachment_id).await.unwrap();
    let stores = || std::fs::read_dir(dir.path()).unwrap().count();
    assert_eq!(stores(), 2);
    drop(second);
    assert_eq!(stores(), 1);
    drop(first);
    assert_eq!(stores(), 0);
}

#[test]
fn the_default_limits_are_the_protocols() {
    let limits = AttachmentLimits::default();
    assert_eq!(
        (
            limits.max_bytes,
            limits.max_chunk_bytes,
            limits.max_turn_attachments,
            limits.max_retained,
            limits.ttl,
            limits.media_types,
        ),
        (
            16_777_216,
            2_097_152,
            8,
            16,
            Duration::from_secs(1_800),
            MediaType::ALL.to_vec(),
        )
    );
}

#[tokio::test]
async fn dropping_the_store_removes_its_spool_files() {
    let fx = Fixture::standard();
    fx.committed(THREAD, b"abc").await;
    fx.stage_chunks(THREAD, "b.png", b"abc").await;
    assert_eq!(fx.spool_files(), 2);
    let Fixture {
        store,
        spool,
        _spool_dir,
        ..
    } = fx;
    drop(store);
    assert_eq!(std::fs::read_dir(&spool).unwrap().count(), 0);
}
