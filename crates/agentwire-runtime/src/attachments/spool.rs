//! The spool directory's files, which hold the attachments' content: the directory and its
//! leftovers, a new spool file, a chunk written at its offset or read back, and a local file
//! copied in with a bounded buffer while it is hashed.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

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

/// The file in a store's own directory whose exclusive lock says the store is alive.
const LOCK_FILE: &str = "lock";

/// A store's own directory in the spool directory `dir` (created if missing): `<dir>/<uuid>`,
/// new, with its `lock` file locked for as long as the returned file is open. Stores sharing
/// `dir` (runtimes of two processes on one state directory) so never touch each other's files.
/// The directories of stores that are gone (their lock free) are removed first, with their spool
/// files, as are spool files left in `dir` itself.
pub(super) fn claim_spool(dir: &Path) -> io::Result<(PathBuf, File)> {
    create_spool_dir(dir)?;
    remove_leftovers(dir)?;
    // A store starting at the same moment may take the directory being set up for one that
    // stopped, in the instant before its lock is taken: set up again, under another name.
    let mut attempts = 3;
    loop {
        match claim_new(dir) {
            Err(_) if attempts > 1 => attempts -= 1,
            claimed => return claimed,
        }
    }
}

/// Sets up a store's directory in `dir` under a name of its own, locked, then moves it into
/// place, so that no store sees it there unlocked and removes it.
fn claim_new(dir: &Path) -> io::Result<(PathBuf, File)> {
    let id = uuid::Uuid::new_v4();
    let staging = dir.join(format!("{id}.new"));
    create_spool_dir(&staging)?;
    let lock = create_spool_file(&staging.join(LOCK_FILE))?;
    lock_now(&lock)?.ok_or_else(|| io::Error::other("a new spool lock is held elsewhere"))?;
    let own = dir.join(id.to_string());
    fs::rename(&staging, &own)?;
    Ok((own, lock))
}

/// Takes `file`'s exclusive lock if it is free: `None` when another holds it.
fn lock_now(file: &File) -> io::Result<Option<()>> {
    match file.try_lock() {
        Ok(()) => Ok(Some(())),
        Err(fs::TryLockError::WouldBlock) => Ok(None),
        Err(fs::TryLockError::Error(error)) => Err(error),
    }
}

/// Removes the spool files (`<uuid>.attachment`) of `dir`, and the directories of stores that
/// are gone (`<uuid>` whose lock is free) with their spool files and lock; nothing else.
fn remove_leftovers(dir: &Path) -> io::Result<()> {
    for item in fs::read_dir(dir)? {
        let item = item?;
        let name = item.file_name();
        let Some(name) = name.to_str() else { continue };
        let kind = item.file_type()?;
        let is_store = |name: &str| uuid::Uuid::parse_str(name).is_ok();
        if kind.is_file() && is_spool_file(name) {
            gone_ok(fs::remove_file(item.path()))?;
        } else if kind.is_dir()
            && (is_store(name) || name.strip_suffix(".new").is_some_and(is_store))
        {
            // A store's directory, or one a store was setting up when it stopped.
            gone_ok(remove_if_gone(&item.path()))?;
        }
    }
    Ok(())
}

/// `result`, with what another store removed meanwhile (its cleanup racing this one) taken as
/// done.
fn gone_ok(result: io::Result<()>) -> io::Result<()> {
    match result {
        Err(error) if error.kind() == io::ErrorKind::NotFound => Ok(()),
        other => other,
    }
}

/// Removes the store directory `own` if its store is gone: its lock is free (held here while it
/// is removed, so that no other store removes it too).
fn remove_if_gone(own: &Path) -> io::Result<()> {
    let lock = match File::open(own.join(LOCK_FILE)) {
        Ok(lock) => lock,
        // Not a store's directory as this build makes them: left alone.
        Err(error) if error.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(error) => return Err(error),
    };
    if lock_now(&lock)?.is_none() {
        return Ok(());
    }
    for item in fs::read_dir(own)? {
        let item = item?;
        if item
            .file_name()
            .to_str()
            .is_some_and(|name| is_spool_file(name) || name == LOCK_FILE)
            && item.file_type()?.is_file()
        {
            fs::remove_file(item.path())?;
        }
    }
    drop(lock);
    // Not empty when it holds what this build did not put there: left.
    let _ = fs::remove_dir(own);
    Ok(())
}

/// Whether `name` is a spool file's: `<uuid>.attachment`.
fn is_spool_file(name: &str) -> bool {
    name.strip_suffix(SPOOL_SUFFIX)
        .is_some_and(|stem| uuid::Uuid::parse_str(stem).is_ok())
}

/// Removes a store's own directory (its spool files went with their attachments) and its lock,
/// as the store ends.
pub(super) fn release_spool(own: &Path) {
    let _ = fs::remove_file(own.join(LOCK_FILE));
    let _ = fs::remove_dir(own);
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
    let mut input = open_source(source).map_err(|error| {
        // Linked since it was lstat'ed.
        #[cfg(unix)]
        if error.raw_os_error() == Some(libc::ELOOP) {
            return rejected(PathRejection::Changed);
        }
        let _ = error;
        rejected(PathRejection::Unreadable)
    })?;
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

/// Opens a local file to read it, without blocking and without following a symbolic link, for
/// what was `lstat`ed as a regular file may be something else by now: a FIFO opened for reading
/// would block until a writer came (on a thread of the blocking pool, holding a quota slot),
/// and a link would be followed. What is opened is then checked by its own metadata.
fn open_source(source: &Path) -> io::Result<File> {
    let mut options = OpenOptions::new();
    options.read(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt as _;
        options.custom_flags(libc::O_NONBLOCK | libc::O_NOFOLLOW);
    }
    options.open(source)
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

#[cfg(all(test, unix))]
mod tests {
    #![allow(clippy::unwrap_used)]

    use std::time::Duration;

    use super::open_source;

    /// A path swapped for a FIFO after it was `lstat`ed opens at once (there is no writer), and
    /// is then refused by its metadata; a link swapped in is not followed.
    #[test]
    fn a_fifo_or_a_link_is_opened_without_blocking_or_following() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("fifo");
        let made = std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap();
        assert!(made.success());
        let (tx, rx) = std::sync::mpsc::channel();
        let path = fifo.clone();
        std::thread::spawn(move || {
            let _ = tx.send(open_source(&path).map(|file| file.metadata().unwrap().is_file()));
        });
        let opened = rx.recv_timeout(Duration::from_secs(5));
        if opened.is_err() {
            // Unblock the reader before failing.
            let _ = std::fs::write(&fifo, b"");
        }
        assert!(
            matches!(opened, Ok(Ok(false))),
            "opening a FIFO: {opened:?}"
        );

        let target = dir.path().join("target.txt");
        std::fs::write(&target, b"x").unwrap();
        let link = dir.path().join("link.txt");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let error = open_source(&link).unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ELOOP));
    }
}
