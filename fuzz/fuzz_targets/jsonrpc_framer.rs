//! Fuzz target: the NDJSON framer, fed in chunks chosen by the input, must yield exactly the
//! frames of the framing rules applied to the whole input, and stay within its memory bound.

#![no_main]

use std::io;
use std::pin::{Pin, pin};
use std::task::{Context, Poll, Waker};

use agentwire_jsonrpc::{Frame, FrameReader};
use libfuzzer_sys::fuzz_target;
use tokio::io::{AsyncRead, ReadBuf};

/// Hands out the data in chunks whose sizes cycle through `sizes`.
struct Chunked<'a> {
    data: &'a [u8],
    sizes: &'a [u8],
    turn: usize,
}

impl AsyncRead for Chunked<'_> {
    fn poll_read(
        self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let size = usize::from(this.sizes[this.turn % this.sizes.len()]).max(1);
        this.turn += 1;
        let n = size.min(this.data.len()).min(buf.remaining());
        buf.put_slice(&this.data[..n]);
        this.data = &this.data[n..];
        Poll::Ready(Ok(()))
    }
}

#[derive(Debug, PartialEq, Eq)]
enum Owned {
    Line(Vec<u8>),
    Oversize(u64),
}

fn model(data: &[u8], limit: usize) -> Vec<Owned> {
    let mut pieces: Vec<&[u8]> = data.split(|b| *b == b'\n').collect();
    if pieces.last().is_some_and(|last| last.is_empty()) {
        pieces.pop();
    }
    pieces
        .into_iter()
        .filter_map(|piece| {
            let piece = piece.strip_suffix(b"\r").unwrap_or(piece);
            if piece.len() > limit {
                Some(Owned::Oversize(piece.len() as u64))
            } else if piece.iter().all(|b| matches!(b, b' ' | b'\t' | b'\r')) {
                None
            } else {
                Some(Owned::Line(piece.to_vec()))
            }
        })
        .collect()
}

fuzz_target!(|input: &[u8]| {
    // Header: the frame limit, then up to four chunk sizes; the rest is the stream.
    if input.len() < 5 {
        return;
    }
    let limit = usize::from(input[0]) * 4 + 1;
    let (sizes, data) = input[1..].split_at(4);
    let mut reader = FrameReader::new(Chunked { data, sizes, turn: 0 }, limit);
    let mut cx = Context::from_waker(Waker::noop());
    let mut frames = Vec::new();
    loop {
        // The chunked reader is always ready, so one poll finishes each read.
        let next = pin!(reader.next_frame()).poll(&mut cx);
        let Poll::Ready(result) = next else {
            panic!("an always-ready reader left the framer pending");
        };
        match result {
            Ok(Some(Frame::Line(line))) => frames.push(Owned::Line(line.to_vec())),
            Ok(Some(Frame::Oversize { length })) => frames.push(Owned::Oversize(length)),
            Ok(None) => break,
            Err(error) => panic!("in-memory reads do not fail: {error}"),
        }
        assert!(reader.buffer_capacity() <= limit + 2 + 8 * 1024);
    }
    assert_eq!(frames, model(data, limit));
});
