//! Moving one direction's bytes: lines are cut at `\n`, each whole line is inspected, recorded
//! and then written on unchanged (its line ending included, blank lines too); a line over the
//! limit is written on as it arrives, without being held, and reported once it ends.
//!
//! **Invariant:** the bytes written are exactly the bytes read, in order; at most the line
//! limit plus one read chunk is held per direction.

use std::io;

use tokio::io::{AsyncRead, AsyncReadExt as _, AsyncWrite, AsyncWriteExt as _};

use super::Proxy;
use super::inspect::Direction;

/// Bytes asked of the reader at a time.
const READ_CHUNK: usize = 64 * 1024;

/// A line buffer that grew past this is given back after its line.
const KEEP_CAPACITY: usize = 1024 * 1024;

/// How one direction ended.
#[derive(Debug)]
pub enum PumpEnd {
    /// The reader reached its end; everything read was written.
    Eof,
    /// Reading failed.
    ReadFailed(io::Error),
    /// Writing failed (the reader of the other side went away).
    WriteFailed(io::Error),
}

enum Step {
    Go,
    Stop(PumpEnd),
}

fn strip_ending(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    line.strip_suffix(b"\r").unwrap_or(line)
}

fn is_blank(text: &[u8]) -> bool {
    text.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r'))
}

async fn write<W: AsyncWrite + Unpin>(writer: &mut W, bytes: &[u8]) -> Step {
    match writer.write_all(bytes).await {
        Ok(()) => Step::Go,
        Err(error) => Step::Stop(PumpEnd::WriteFailed(error)),
    }
}

async fn flush<W: AsyncWrite + Unpin>(writer: &mut W) -> Step {
    match writer.flush().await {
        Ok(()) => Step::Go,
        Err(error) => Step::Stop(PumpEnd::WriteFailed(error)),
    }
}

macro_rules! go {
    ($step:expr) => {
        if let Step::Stop(end) = $step {
            return end;
        }
    };
}

impl Proxy {
    /// Forwards `reader` to `writer` in `direction` until the reader ends or a side fails,
    /// inspecting and recording each line before it is written.
    pub async fn pump<R, W>(&self, direction: Direction, reader: &mut R, writer: &mut W) -> PumpEnd
    where
        R: AsyncRead + Unpin,
        W: AsyncWrite + Unpin,
    {
        let max = self.max_line_bytes;
        let mut chunk = vec![0u8; READ_CHUNK];
        let mut line: Vec<u8> = Vec::new();
        // While a line over the limit streams through: its bytes so far, and whether the last
        // one was `\r`.
        let mut oversize: Option<(u64, bool)> = None;
        // Bytes of a line over the limit were written and not flushed yet.
        let mut unflushed = false;
        loop {
            let read = match reader.read(&mut chunk).await {
                Ok(0) => break,
                Ok(read) => read,
                Err(error) if error.kind() == io::ErrorKind::Interrupted => continue,
                Err(error) => {
                    go!(write(writer, &line).await);
                    go!(flush(writer).await);
                    return PumpEnd::ReadFailed(error);
                }
            };
            let mut data = &chunk[..read];
            while !data.is_empty() {
                let newline = memchr::memchr(b'\n', data);
                let (piece, rest) = data.split_at(newline.map_or(data.len(), |at| at + 1));
                data = rest;
                if let Some((so_far, last_cr)) = oversize.as_mut() {
                    go!(write(writer, piece).await);
                    unflushed = true;
                    if let Some(at) = newline {
                        let cr = if at > 0 {
                            piece[at - 1] == b'\r'
                        } else {
                            *last_cr
                        };
                        let length = *so_far + at as u64 - u64::from(cr);
                        self.oversize(direction, length);
                        oversize = None;
                    } else {
                        *so_far += piece.len() as u64;
                        *last_cr = piece.last() == Some(&b'\r');
                    }
                    continue;
                }
                if newline.is_some() {
                    // The line's length without its ending, which may be split across reads
                    // (the `\r` at the end of `line`, the `\n` alone in `piece`).
                    let length = if piece == b"\n" {
                        strip_ending(&line).len()
                    } else {
                        line.len() + strip_ending(piece).len()
                    };
                    if length > max {
                        go!(write(writer, &line).await);
                        go!(write(writer, piece).await);
                        unflushed = true;
                        self.oversize(direction, length as u64);
                    } else {
                        line.extend_from_slice(piece);
                        go!(self.forward_line(direction, &line, writer).await);
                    }
                    line.clear();
                    if line.capacity() > KEEP_CAPACITY {
                        line = Vec::new();
                    }
                } else if line.len() + piece.len() > max + 1 {
                    // One byte of slack keeps the `\r` of a CRLF line of exactly `max` bytes.
                    go!(write(writer, &line).await);
                    go!(write(writer, piece).await);
                    unflushed = true;
                    oversize = Some((
                        (line.len() + piece.len()) as u64,
                        piece.last() == Some(&b'\r'),
                    ));
                    line = Vec::new();
                } else {
                    line.extend_from_slice(piece);
                }
            }
            if unflushed {
                go!(flush(writer).await);
                unflushed = false;
            }
        }
        if let Some((so_far, last_cr)) = oversize {
            self.oversize(direction, so_far - u64::from(last_cr));
        } else if !line.is_empty() {
            // A last line without a line feed is a frame like any other.
            let length = strip_ending(&line).len();
            if length > max {
                go!(write(writer, &line).await);
                self.oversize(direction, length as u64);
            } else {
                go!(self.forward_line(direction, &line, writer).await);
            }
        }
        go!(flush(writer).await);
        PumpEnd::Eof
    }

    /// One whole line (with its line ending): checked and recorded, then written.
    async fn forward_line<W: AsyncWrite + Unpin>(
        &self,
        direction: Direction,
        line: &[u8],
        writer: &mut W,
    ) -> Step {
        let text = strip_ending(line);
        if !is_blank(text) {
            let inspection = self.session.inspect(direction, text);
            self.seen(direction, text, &inspection);
        }
        if let Step::Stop(end) = write(writer, line).await {
            return Step::Stop(end);
        }
        flush(writer).await
    }
}
