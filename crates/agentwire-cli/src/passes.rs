//! Inputs read more than once, a piece or a line at a time: the run-log commands read a log in
//! passes instead of holding its text, so their memory follows the run state, not the log.

use std::borrow::Cow;
use std::cell::RefCell;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};

use crate::input::{self, InputError, MAX_DOCUMENT_BYTES, READ_BUFFER_BYTES};

/// An input read in passes: a regular file is opened again for each pass, each reading the
/// bytes the first one found (a log still being written gives every pass the same lines);
/// standard input and anything else that cannot be read twice (a pipe named by a path, as
/// `<(…)` gives, a FIFO, a device) is copied to a temporary file (deleted when this is
/// dropped) while it is read the first time.
pub(crate) struct Passes {
    /// What each pass opens.
    path: PathBuf,
    /// The bytes each pass reads.
    len: u64,
    /// How errors name the input.
    name: String,
    /// The copy of standard input.
    _spool: Option<tempfile::TempPath>,
    /// The first read error a line pass met (it ends the pass early).
    error: RefCell<Option<InputError>>,
}

impl Passes {
    /// Reads `path` once in pieces that end just after a line feed (the last one where the input
    /// ends), handing each to `each`: the first of about one read, each next one twice as large
    /// up to `piece_bytes` (more only for a longer line). Once `each` answers `false` a file is
    /// read no further (standard input, or anything else not a regular file, still is, to
    /// complete its copy).
    pub(crate) fn stream(
        path: &Path,
        piece_bytes: usize,
        each: impl FnMut(&[u8]) -> bool,
    ) -> Result<Passes, InputError> {
        let (reader, size) = input::open(path)?;
        Passes::stream_from(path, reader, size, piece_bytes, each)
    }

    /// [`Passes::stream`] of `reader`, opened from `path`; `size` is the size of a regular file
    /// (which can be read again), `None` for anything else, which is copied as it is read.
    fn stream_from(
        path: &Path,
        mut reader: Box<dyn Read>,
        size: Option<u64>,
        piece_bytes: usize,
        mut each: impl FnMut(&[u8]) -> bool,
    ) -> Result<Passes, InputError> {
        let name = input::display_name(path);
        let read_error = |source| InputError::Read {
            name: name.clone(),
            source,
        };
        let mut spool = if size.is_none() {
            let file = tempfile::NamedTempFile::new().map_err(read_error)?;
            let (file, temp) = file.into_parts();
            Some((io::BufWriter::with_capacity(READ_BUFFER_BYTES, file), temp))
        } else {
            None
        };
        let mut wanted = true;
        // Pieces grow from one read to `piece_bytes`: a log declined on its first lines costs
        // little more than a read. The buffer is reserved for the largest piece at once (pages
        // are resident only once filled), so it is never moved to a larger one: an allocator
        // that keeps freed memory a while (mimalloc) would otherwise hold every smaller buffer
        // beside the current one.
        let mut piece = piece_bytes.min(READ_BUFFER_BYTES);
        let mut buf: Vec<u8> = Vec::with_capacity(piece_bytes.saturating_add(READ_BUFFER_BYTES));
        // Where the search for the last line feed of `buf` goes on from.
        let mut searched = 0;
        let mut len: u64 = 0;
        loop {
            let filled = buf.len();
            buf.resize(filled + READ_BUFFER_BYTES, 0);
            let n = loop {
                match reader.read(&mut buf[filled..]) {
                    Ok(n) => break n,
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(e) => return Err(read_error(e)),
                }
            };
            buf.truncate(filled + n);
            if n == 0 {
                break;
            }
            len += n as u64;
            if let Some((w, _)) = &mut spool {
                w.write_all(&buf[filled..]).map_err(read_error)?;
            }
            if !wanted {
                buf.clear();
                continue;
            }
            if buf.len() >= piece {
                match memchr::memrchr(b'\n', &buf[searched..]) {
                    Some(at) => {
                        let cut = searched + at + 1;
                        wanted = each(&buf[..cut]);
                        buf.drain(..cut);
                        searched = 0;
                        piece = piece.saturating_mul(2).min(piece_bytes);
                        if !wanted && spool.is_none() {
                            break;
                        }
                    }
                    None => searched = buf.len(),
                }
            }
        }
        if wanted && !buf.is_empty() {
            each(&buf);
        }
        // A file declined early was not read to its end: later passes read all of it, as it
        // was opened.
        if let (false, Some(size)) = (wanted, size) {
            len = size;
        }
        let spool = match spool {
            Some((w, temp)) => {
                w.into_inner().map_err(|e| read_error(e.into_error()))?;
                Some(temp)
            }
            None => None,
        };
        Ok(Passes {
            path: spool
                .as_ref()
                .map_or_else(|| path.to_owned(), |t| t.to_path_buf()),
            len,
            name,
            _spool: spool,
            error: RefCell::new(None),
        })
    }

    /// An input to read in line passes only (standard input is copied whole first).
    pub(crate) fn open(path: &Path) -> Result<Passes, InputError> {
        // Opened once here so that a missing file is an error before any output.
        let (reader, size) = input::open(path)?;
        let Some(len) = size else {
            return Passes::stream_from(path, reader, None, 0, |_| false);
        };
        Ok(Passes {
            path: path.to_owned(),
            len,
            name: input::display_name(path),
            _spool: None,
            error: RefCell::new(None),
        })
    }

    /// The whole text, for the coercer that needs it (at most [`MAX_DOCUMENT_BYTES`]).
    pub(crate) fn read_whole(&self) -> Result<Vec<u8>, InputError> {
        let file = File::open(&self.path).map_err(|source| self.read_error(source))?;
        input::read_all(file.take(self.len), Path::new(&self.name))
    }

    /// The error a line pass met, if any: what was written from that pass is incomplete.
    pub(crate) fn check(&self) -> Result<(), InputError> {
        match self.error.borrow_mut().take() {
            Some(err) => Err(err),
            None => Ok(()),
        }
    }

    fn read_error(&self, source: io::Error) -> InputError {
        InputError::Read {
            name: self.name.clone(),
            source,
        }
    }

    fn fail(&self, err: InputError) {
        let mut slot = self.error.borrow_mut();
        if slot.is_none() {
            *slot = Some(err);
        }
    }
}

impl agentwire_runlog::LineSource for Passes {
    fn lines(&self) -> Box<dyn Iterator<Item = Cow<'_, [u8]>> + '_> {
        // The bytes the first pass found.
        let reader = match File::open(&self.path) {
            Ok(file) => BufReader::with_capacity(READ_BUFFER_BYTES, file.take(self.len)),
            Err(e) => {
                self.fail(self.read_error(e));
                return Box::new(std::iter::empty());
            }
        };
        let mut reader = reader.take(MAX_DOCUMENT_BYTES + 1);
        Box::new(std::iter::from_fn(move || {
            let mut line = Vec::new();
            match reader.read_until(b'\n', &mut line) {
                Ok(0) => None,
                Ok(_) if reader.limit() == 0 => {
                    // One line longer than a whole document may be: not read on.
                    self.fail(InputError::TooLarge {
                        name: self.name.clone(),
                    });
                    None
                }
                Ok(_) => {
                    if line.last() == Some(&b'\n') {
                        line.pop();
                    }
                    reader.set_limit(MAX_DOCUMENT_BYTES + 1);
                    Some(Cow::Owned(line))
                }
                Err(e) => {
                    self.fail(self.read_error(e));
                    None
                }
            }
        }))
    }
}
