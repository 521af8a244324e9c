//! Reading what commands are given: files and standard input, as one whole document or as NDJSON
//! lines, with the limits and error codes every command shares.

use std::fs::File;
use std::io::{self, BufRead, Read};
use std::path::{Path, PathBuf};

/// Longest NDJSON line read, not counting its line feed and a carriage return before it. A
/// longer line is reported as one `input.line-too-long` issue and skipped without being held in
/// memory.
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// Largest input read as one document (a schema, a message without `--ndjson`, a document to
/// format); a larger one is refused with `input.too-large`.
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// Size of the reads from an input.
pub(crate) const READ_BUFFER_BYTES: usize = 256 << 10;

/// Stable code of an NDJSON line over [`MAX_LINE_BYTES`].
pub(crate) const LINE_TOO_LONG: &str = "input.line-too-long";

/// Why an input could not be read.
#[derive(Debug, thiserror::Error)]
pub(crate) enum InputError {
    /// The file or standard input could not be opened or read.
    #[error("cannot read {name}: {source}")]
    Read {
        name: String,
        #[source]
        source: io::Error,
    },
    /// A whole-document input over [`MAX_DOCUMENT_BYTES`].
    #[error("{name} is larger than the limit of {limit} MiB for one document (a stream of messages can be read as NDJSON)", limit = MAX_DOCUMENT_BYTES >> 20)]
    TooLarge { name: String },
    /// Standard input (`-`) named more than once: it can be read only once.
    #[error(
        "standard input (`-`) is named {count} times; it can be read only once, so at most one input may be `-`"
    )]
    StdinTwice { count: usize },
}

impl InputError {
    /// Stable code of the error.
    pub(crate) fn code(&self) -> &'static str {
        match self {
            InputError::Read { .. } => "io",
            InputError::TooLarge { .. } => "input.too-large",
            InputError::StdinTwice { .. } => "input.stdin-twice",
        }
    }
}

/// Whether `path` names standard input.
pub(crate) fn is_stdin(path: &Path) -> bool {
    path.as_os_str() == "-"
}

/// How reports name an input: the path, or `<stdin>`.
pub(crate) fn display_name(path: &Path) -> String {
    if is_stdin(path) {
        "<stdin>".to_owned()
    } else {
        path.display().to_string()
    }
}

/// Refuses a list of inputs that names standard input more than once.
pub(crate) fn stdin_at_most_once<'a>(
    paths: impl IntoIterator<Item = &'a PathBuf>,
) -> Result<(), InputError> {
    let count = paths.into_iter().filter(|p| is_stdin(p)).count();
    if count > 1 {
        return Err(InputError::StdinTwice { count });
    }
    Ok(())
}

/// Opens an input for reading, with its size when it is a regular file.
pub(crate) fn open(path: &Path) -> Result<(Box<dyn Read>, Option<u64>), InputError> {
    if is_stdin(path) {
        return Ok((Box::new(io::stdin().lock()), None));
    }
    let read_error = |source| InputError::Read {
        name: path.display().to_string(),
        source,
    };
    let file = File::open(path).map_err(read_error)?;
    let len = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    Ok((Box::new(file), len))
}

/// Reads a whole input (a file, or standard input for `-`) of at most [`MAX_DOCUMENT_BYTES`].
pub(crate) fn read_document(path: &Path) -> Result<Vec<u8>, InputError> {
    let (reader, _) = open(path)?;
    read_all(reader, path)
}

/// Reads the rest of `reader` as (the rest of) one document named by `path`.
pub(crate) fn read_all(reader: impl Read, path: &Path) -> Result<Vec<u8>, InputError> {
    let mut bytes = Vec::new();
    reader
        .take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| InputError::Read {
            name: display_name(path),
            source,
        })?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        return Err(InputError::TooLarge {
            name: display_name(path),
        });
    }
    Ok(bytes)
}

/// One NDJSON line as handed to the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// The line's bytes, without the line feed and a carriage return before it.
    Text(&'a [u8]),
    /// The line was longer than the limit; only its length in bytes (without the line feed and a
    /// carriage return before it) was kept.
    TooLong(u64),
}

/// One line read by [`LineReader::next_line`].
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct NumberedLine<'a> {
    /// 1-based, counting every line, blank ones included.
    pub(crate) number: u64,
    pub(crate) line: Line<'a>,
    /// Bytes of input the line took, its line feed included.
    pub(crate) consumed: u64,
}

/// The lines of an opened input.
pub(crate) type InputLines = LineReader<io::BufReader<Box<dyn Read>>>;

/// The NDJSON lines of an input (a file, or standard input for `-`), read as [`LineReader`]
/// reads them, with the input's size when it is a regular file.
pub(crate) fn ndjson(
    path: &Path,
    max_line: usize,
) -> Result<(InputLines, Option<u64>), InputError> {
    let (reader, len) = open(path)?;
    let reader = io::BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    Ok((LineReader::new(reader, max_line, display_name(path)), len))
}

/// Reads the non-blank lines of an NDJSON input, holding at most `max_line` bytes of one line
/// (plus a carriage return) in memory; a longer line is drained and reported as
/// [`Line::TooLong`]. A line of `max_line` bytes is accepted whether it ends in LF or CRLF.
#[derive(Debug)]
pub(crate) struct LineReader<R> {
    reader: R,
    max_line: usize,
    /// How read errors name the input.
    name: String,
    number: u64,
    line: Vec<u8>,
}

impl<R: BufRead> LineReader<R> {
    pub(crate) fn new(reader: R, max_line: usize, name: String) -> Self {
        LineReader {
            reader,
            max_line,
            name,
            number: 0,
            line: Vec::new(),
        }
    }

    /// The underlying reader, for a caller that reads the rest another way.
    pub(crate) fn into_inner(self) -> R {
        self.reader
    }

    /// The next non-blank line, or `None` at the end of the input.
    pub(crate) fn next_line(&mut self) -> Result<Option<NumberedLine<'_>>, InputError> {
        let LineReader {
            reader,
            max_line,
            name,
            number,
            line,
        } = self;
        read_line(reader, *max_line, number, line).map_err(|source| InputError::Read {
            name: name.clone(),
            source,
        })
    }
}

/// One step of [`LineReader::next_line`], over the reader's parts.
fn read_line<'l, R: BufRead>(
    reader: &mut R,
    max_line: usize,
    number: &mut u64,
    line: &'l mut Vec<u8>,
) -> io::Result<Option<NumberedLine<'l>>> {
    loop {
        line.clear();
        let mut length: u64 = 0;
        let mut too_long = false;
        let mut ended = false;
        let mut last = None;
        let mut any = false;
        loop {
            let chunk = match reader.fill_buf() {
                Ok(chunk) => chunk,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if chunk.is_empty() {
                break;
            }
            any = true;
            let (piece, ends_line) = match memchr::memchr(b'\n', chunk) {
                Some(i) => (&chunk[..i], true),
                None => (chunk, false),
            };
            length += piece.len() as u64;
            if let Some(&b) = piece.last() {
                last = Some(b);
            }
            // One byte of slack keeps the carriage return of a CRLF line of exactly
            // `max_line` bytes.
            if !too_long {
                if line.len() + piece.len() > max_line + 1 {
                    too_long = true;
                    *line = Vec::new();
                } else {
                    line.extend_from_slice(piece);
                }
            }
            let used = piece.len() + usize::from(ends_line);
            reader.consume(used);
            if ends_line {
                ended = true;
                break;
            }
        }
        if !any {
            return Ok(None);
        }
        *number += 1;
        let consumed = length + u64::from(ended);
        let text_length = length - u64::from(last == Some(b'\r'));
        if too_long || text_length > max_line as u64 {
            *line = Vec::new();
            return Ok(Some(NumberedLine {
                number: *number,
                line: Line::TooLong(text_length),
                consumed,
            }));
        }
        if line.last() == Some(&b'\r') {
            line.pop();
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let text = &line[..];
        return Ok(Some(NumberedLine {
            number: *number,
            line: Line::Text(text),
            consumed,
        }));
    }
}

impl<R: Read> LineReader<io::BufReader<R>> {
    /// What is read from the input but not yet handed out as lines.
    pub(crate) fn buffered(&self) -> &[u8] {
        self.reader.buffer()
    }
}

/// The sentence of an `input.line-too-long` report.
pub(crate) fn line_too_long_message(length: u64) -> String {
    format!("line of {length} bytes is longer than the limit of {MAX_LINE_BYTES} bytes; skipped")
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::BufReader;

    fn lines(input: &[u8], max: usize) -> Vec<(u64, String, u64)> {
        let mut seen = Vec::new();
        // A tiny buffer makes lines span several reads.
        let mut reader = LineReader::new(BufReader::with_capacity(3, input), max, "t".into());
        while let Some(l) = reader.next_line().unwrap() {
            let text = match l.line {
                Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
                Line::TooLong(len) => format!("<too long: {len}>"),
            };
            seen.push((l.number, text, l.consumed));
        }
        seen
    }

    #[test]
    fn splits_lines_and_skips_blank_ones() {
        assert_eq!(
            lines(b"{\"a\":1}\r\n\n  \n[2]\nlast", 100),
            vec![
                (1, "{\"a\":1}".to_owned(), 9),
                (4, "[2]".to_owned(), 4),
                (5, "last".to_owned(), 4)
            ]
        );
    }

    #[test]
    fn over_long_lines_are_reported_not_buffered() {
        assert_eq!(
            lines(b"12345\n123456789\n1\n", 5),
            vec![
                (1, "12345".to_owned(), 6),
                (2, "<too long: 9>".to_owned(), 10),
                (3, "1".to_owned(), 2)
            ]
        );
        assert_eq!(
            lines(b"123456789", 5),
            vec![(1, "<too long: 9>".to_owned(), 9)]
        );
    }

    #[test]
    fn the_limit_is_the_same_with_lf_and_crlf() {
        assert_eq!(
            lines(b"12345\r\n123456\r\n1234\r", 5),
            vec![
                (1, "12345".to_owned(), 7),
                (2, "<too long: 6>".to_owned(), 8),
                (3, "1234".to_owned(), 5)
            ]
        );
        assert_eq!(
            lines(b"123456\n", 5),
            vec![(1, "<too long: 6>".to_owned(), 7)]
        );
        assert_eq!(
            lines(b"1234567\r\n", 5),
            vec![(1, "<too long: 7>".to_owned(), 9)]
        );
    }

    #[test]
    fn standard_input_is_named_at_most_once() {
        let paths = [PathBuf::from("-"), PathBuf::from("a"), PathBuf::from("-")];
        let err = stdin_at_most_once(&paths).unwrap_err();
        assert_eq!(err.code(), "input.stdin-twice");
        assert!(stdin_at_most_once(&paths[..2]).is_ok());
    }
}
