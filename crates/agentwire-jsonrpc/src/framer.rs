//! NDJSON framing over any tokio reader or writer: lines as bytes with an inbound byte limit,
//! oversize lines reported once and skipped without being held, blank lines ignored; outbound
//! one compact object and `\n` per message under the outbound and line-length limits.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use crate::error::FrameError;

/// Default inbound frame limit: Roll's runtime `limits.maxFrameBytes` (4 MiB).
pub const DEFAULT_MAX_INBOUND_FRAME: usize = 4 * 1024 * 1024;

/// The smallest read buffer the reader keeps, and the amount it asks the OS for at least.
const MIN_READ_CHUNK: usize = 8 * 1024;

/// One item read from an NDJSON stream.
#[derive(Debug, PartialEq, Eq)]
pub enum Frame<'a> {
    /// The bytes of one non-blank line, without its `\n` or `\r\n`.
    Line(&'a [u8]),
    /// A line longer than the inbound limit; its bytes were skipped, never held.
    Oversize {
        /// Byte length of the line without its line ending.
        length: u64,
    },
}

/// Reads NDJSON frames from an [`AsyncRead`].
///
/// A frame is the bytes before a `\n`, less one trailing `\r`. Blank and whitespace-only lines
/// (space, tab, `\r`) are skipped. A line whose frame is longer than `max_frame` bytes is
/// reported once as [`Frame::Oversize`] with its full length, and the reader resynchronises at
/// the next `\n`; at most `max_frame + 1` bytes of it are ever buffered. A final line without a
/// `\n` at end of input is a frame like any other.
///
/// [`FrameReader::next_frame`] is cancel-safe: every byte read is kept in the reader, so
/// dropping the future inside `select!` loses nothing and the next call resumes where the last
/// one stopped.
#[derive(Debug)]
pub struct FrameReader<R> {
    inner: R,
    max_frame: usize,
    buf: Vec<u8>,
    /// Start of the unconsumed bytes in `buf`.
    start: usize,
    /// End of the valid bytes in `buf`.
    end: usize,
    /// Bytes from `start` already searched for a line feed.
    scanned: usize,
    /// Bytes to drop from `start` at the next call: the frame last returned and its line feed.
    consume: usize,
    /// While skipping an oversize line: its length so far and whether its last byte was `\r`.
    skipping: Option<Skip>,
    eof: bool,
}

#[derive(Debug, Clone, Copy)]
struct Skip {
    length: u64,
    last_was_cr: bool,
}

impl<R: AsyncRead + Unpin> FrameReader<R> {
    /// A reader with the inbound frame limit `max_frame` (bytes, line ending excluded).
    pub fn new(inner: R, max_frame: usize) -> Self {
        FrameReader {
            inner,
            max_frame,
            buf: Vec::new(),
            start: 0,
            end: 0,
            scanned: 0,
            consume: 0,
            skipping: None,
            eof: false,
        }
    }

    /// The inbound frame limit in bytes.
    pub fn max_frame(&self) -> usize {
        self.max_frame
    }

    /// Bytes currently allocated for buffering (bounded by the frame limit plus one read chunk).
    pub fn buffer_capacity(&self) -> usize {
        self.buf.capacity()
    }

    /// Whether [`FrameReader::next_frame`] can answer from what is already buffered, without
    /// reading: a complete line is there (or the end of input was read). A caller that
    /// answers what it reads writes its answers out when this is false.
    pub fn has_complete_line(&mut self) -> bool {
        self.start += self.consume;
        self.consume = 0;
        if self.eof {
            return true;
        }
        let pending = &self.buf[self.start..self.end];
        if self.skipping.is_some() {
            return memchr::memchr(b'\n', pending).is_some();
        }
        match memchr::memchr(b'\n', &pending[self.scanned..]) {
            Some(_) => true,
            None => {
                self.scanned = pending.len();
                false
            }
        }
    }

    /// The next frame, or `None` at end of input.
    ///
    /// # Errors
    /// The underlying reader's I/O errors.
    pub async fn next_frame(&mut self) -> io::Result<Option<Frame<'_>>> {
        self.start += self.consume;
        self.consume = 0;
        loop {
            if let Some(skip) = self.skipping {
                let pending = &self.buf[self.start..self.end];
                match memchr::memchr(b'\n', pending) {
                    Some(pos) => {
                        let mut length = skip.length + pos as u64;
                        let cr = if pos > 0 {
                            pending[pos - 1] == b'\r'
                        } else {
                            skip.last_was_cr
                        };
                        if cr {
                            length -= 1;
                        }
                        self.start += pos + 1;
                        self.scanned = 0;
                        self.skipping = None;
                        return Ok(Some(Frame::Oversize { length }));
                    }
                    None => {
                        let skip = Skip {
                            length: skip.length + pending.len() as u64,
                            last_was_cr: pending.last().map_or(skip.last_was_cr, |b| *b == b'\r'),
                        };
                        self.skipping = Some(skip);
                        self.start = 0;
                        self.end = 0;
                        self.scanned = 0;
                        if self.eof {
                            self.skipping = None;
                            let length = skip.length - u64::from(skip.last_was_cr);
                            return Ok(Some(Frame::Oversize { length }));
                        }
                        self.fill().await?;
                        continue;
                    }
                }
            }

            let pending = &self.buf[self.start..self.end];
            if let Some(pos) = memchr::memchr(b'\n', &pending[self.scanned..]) {
                let nl = self.scanned + pos;
                let mut frame_end = nl;
                if frame_end > 0 && pending[frame_end - 1] == b'\r' {
                    frame_end -= 1;
                }
                self.scanned = 0;
                if frame_end > self.max_frame {
                    self.start += nl + 1;
                    return Ok(Some(Frame::Oversize {
                        length: frame_end as u64,
                    }));
                }
                if is_blank(&pending[..frame_end]) {
                    self.start += nl + 1;
                    continue;
                }
                self.consume = nl + 1;
                let start = self.start;
                return Ok(Some(Frame::Line(&self.buf[start..start + frame_end])));
            }
            self.scanned = pending.len();
            // A frame of exactly `max_frame` bytes may still be followed by `\r\n`, so only
            // more than `max_frame + 1` unterminated bytes prove the line is oversize.
            if pending.len() > self.max_frame + 1 {
                self.skipping = Some(Skip {
                    length: pending.len() as u64,
                    last_was_cr: pending.last().is_some_and(|b| *b == b'\r'),
                });
                self.start = 0;
                self.end = 0;
                self.scanned = 0;
                continue;
            }
            if self.eof {
                if pending.is_empty() {
                    return Ok(None);
                }
                let mut frame_end = pending.len();
                if pending[frame_end - 1] == b'\r' {
                    frame_end -= 1;
                }
                self.consume = pending.len();
                self.scanned = 0;
                if frame_end > self.max_frame {
                    self.start += self.consume;
                    self.consume = 0;
                    return Ok(Some(Frame::Oversize {
                        length: frame_end as u64,
                    }));
                }
                if is_blank(&pending[..frame_end]) {
                    self.start += self.consume;
                    self.consume = 0;
                    return Ok(None);
                }
                let start = self.start;
                return Ok(Some(Frame::Line(&self.buf[start..start + frame_end])));
            }
            self.fill().await?;
        }
    }

    /// Reads more bytes after `end`, compacting or growing the buffer first. The buffer never
    /// grows past `max_frame + 2` bytes of line plus one read chunk, which bounds memory per
    /// connection: more unterminated bytes than that already prove a line oversize.
    async fn fill(&mut self) -> io::Result<()> {
        if self.start > 0 && (self.start == self.end || self.buf.len() - self.end < MIN_READ_CHUNK)
        {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        let cap = self.max_frame.saturating_add(2 + MIN_READ_CHUNK);
        if self.buf.len() - self.end < MIN_READ_CHUNK && self.buf.len() < cap {
            let new_len = (self.buf.len() * 2).max(MIN_READ_CHUNK).min(cap);
            self.buf.reserve_exact(new_len - self.buf.len());
            self.buf.resize(new_len, 0);
        }
        let read = self.inner.read(&mut self.buf[self.end..]).await?;
        if read == 0 {
            self.eof = true;
        }
        self.end += read;
        Ok(())
    }
}

fn is_blank(line: &[u8]) -> bool {
    line.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

/// Writes NDJSON frames to an [`AsyncWrite`]: each message is one line ending in `\n`.
#[derive(Debug)]
pub struct FrameWriter<W> {
    inner: W,
}

impl<W: AsyncWrite + Unpin> FrameWriter<W> {
    /// A writer over `inner` (wrap it in a `BufWriter` to batch small writes).
    pub fn new(inner: W) -> Self {
        FrameWriter { inner }
    }

    /// Writes one encoded line (which must already end in `\n`, as [`encode_line`] returns).
    ///
    /// # Errors
    /// The underlying writer's I/O errors.
    pub async fn write_line(&mut self, line: &[u8]) -> io::Result<()> {
        self.inner.write_all(line).await
    }

    /// Flushes the underlying writer.
    ///
    /// # Errors
    /// The underlying writer's I/O errors.
    pub async fn flush(&mut self) -> io::Result<()> {
        self.inner.flush().await
    }

    /// Flushes and shuts the underlying writer down (the other side reads end of input).
    ///
    /// # Errors
    /// The underlying writer's I/O errors.
    pub async fn shutdown(&mut self) -> io::Result<()> {
        self.inner.flush().await?;
        self.inner.shutdown().await
    }

    /// The underlying writer.
    pub fn into_inner(self) -> W {
        self.inner
    }
}

/// Encodes `message` as one compact JSON line ending in `\n`.
///
/// `max_frame` bounds the JSON text (line feed excluded); `max_line` optionally bounds it again
/// for a peer whose reader accepts less (the ChainlessChain SDK: 65,536 bytes before the `\n`).
/// A message over either limit is an error, never a truncated line.
///
/// # Errors
/// [`FrameError::OutboundTooLarge`], [`FrameError::LineTooLong`], or [`FrameError::Encode`]
/// when the value cannot be serialised.
pub fn encode_line<T: serde::Serialize + ?Sized>(
    message: &T,
    max_frame: usize,
    max_line: Option<usize>,
) -> Result<Vec<u8>, FrameError> {
    let mut line = Vec::with_capacity(128);
    serde_json::to_writer(&mut line, message).map_err(|e| FrameError::Encode(e.to_string()))?;
    check_line(&line, max_frame, max_line)?;
    line.push(b'\n');
    Ok(line)
}

pub(crate) fn check_line(
    line: &[u8],
    max_frame: usize,
    max_line: Option<usize>,
) -> Result<(), FrameError> {
    if line.len() > max_frame {
        return Err(FrameError::OutboundTooLarge {
            length: line.len(),
            limit: max_frame,
        });
    }
    if let Some(limit) = max_line
        && line.len() > limit
    {
        return Err(FrameError::LineTooLong {
            length: line.len(),
            limit,
        });
    }
    Ok(())
}
