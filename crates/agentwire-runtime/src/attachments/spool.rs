//! The spool directory's files, which hold the attachments' content: the directory and its
//! leftovers, a new spool file, a chunk written at its offset or read back, and a local file
//! copied in with a bounded buffer while it is hashed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::Path;

use sha2::{Digest as _, Sha256};

use super::error::not_found;
use super::{AttachmentError, PathRejection, SPOOL_SUFFIX, SizeLimit};

/// Bytes read at a time when a local file is copied into the spool.
const COPY_BUFFER_BYTES: usize = 64 * 1024;

pub(super) fn hex(digest: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut text = String::with_capacity(digest.len() * 2);
    for byte in digest {
        text.push(char::from(DIGITS[usize::from(byte >> 4)]));
        text.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    text
}

pub(super) fn create_spool_dir(path: &Path) -> io::Result<()> {
    let mut builder = fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(path)
}

/// Removes the spool files (`<uuid>.attachment`) in `dir`, and nothing else.
pub(super) fn remove_leftovers(dir: &Path) -> io::Result<()> {
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

pub(super) fn create_spool_file(path: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    options.open(path)
}

/// Writes a chunk at `offset` of an existing spool file; on failure the file is cut back to
/// `offset`, so a refused chunk leaves nothing behind.
pub(super) fn write_at(
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
pub(super) fn same_bytes_at(
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
pub(super) fn copy_local(
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
