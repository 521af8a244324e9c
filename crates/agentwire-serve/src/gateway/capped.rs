//! The socket under a connection's WebSocket, with the pre-auth frame cap: until the handshake
//! ends, at most one capped frame's bytes are read ahead of the messages delivered, so a client
//! that has not authenticated cannot make the gateway buffer more than that. A frame over the
//! cap fails the read (the connection is closed 1009); after the handshake the cap is lifted and
//! the WebSocket's own message limit (`maxPayload`) applies.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

/// Bytes of a WebSocket frame header a client sends with a payload of `len` bytes (masked).
pub(super) fn frame_overhead(len: usize) -> usize {
    let extended = if len < 126 {
        0
    } else if len <= 0xFFFF {
        2
    } else {
        8
    };
    2 + extended + 4
}

/// What the connection and its socket share: the cap, the bytes read ahead of the messages
/// delivered, and whether the cap stopped a read.
#[derive(Debug)]
pub(super) struct Gate {
    /// Most bytes read ahead; `usize::MAX` once lifted.
    limit: AtomicUsize,
    /// Bytes read and not yet delivered as a message.
    ahead: AtomicUsize,
    tripped: AtomicBool,
}

impl Gate {
    /// A gate letting one frame of at most `payload` bytes through at a time.
    pub(super) fn new(payload: usize) -> Arc<Gate> {
        Arc::new(Gate {
            limit: AtomicUsize::new(payload + frame_overhead(payload)),
            ahead: AtomicUsize::new(0),
            tripped: AtomicBool::new(false),
        })
    }

    /// A message of `len` payload bytes was delivered: its bytes no longer count.
    pub(super) fn delivered(&self, len: usize) {
        let frame = len + frame_overhead(len);
        let _ = self
            .ahead
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |ahead| {
                Some(ahead.saturating_sub(frame))
            });
    }

    /// The upgrade request was read: its bytes are not a frame's.
    pub(super) fn upgraded(&self) {
        self.ahead.store(0, Ordering::Release);
    }

    /// The handshake ended: no cap from now on.
    pub(super) fn lift(&self) {
        self.limit.store(usize::MAX, Ordering::Release);
    }

    /// Whether a read failed because a frame was over the cap.
    pub(super) fn tripped(&self) -> bool {
        self.tripped.load(Ordering::Acquire)
    }
}

/// A socket read through a [`Gate`].
#[derive(Debug)]
pub(super) struct Capped<S> {
    inner: S,
    gate: Arc<Gate>,
    /// Where a capped read lands before it is copied out (only while capped).
    scratch: Vec<u8>,
}

impl<S> Capped<S> {
    /// `inner`, read through `gate`.
    pub(super) fn new(inner: S, gate: Arc<Gate>) -> Capped<S> {
        Capped {
            inner,
            gate,
            scratch: Vec::new(),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for Capped<S> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let limit = this.gate.limit.load(Ordering::Acquire);
        if limit == usize::MAX {
            if this.scratch.capacity() > 0 {
                this.scratch = Vec::new();
            }
            return Pin::new(&mut this.inner).poll_read(cx, buf);
        }
        let ahead = this.gate.ahead.load(Ordering::Acquire);
        let room = limit.saturating_sub(ahead).min(buf.remaining());
        if room == 0 {
            if buf.remaining() == 0 {
                return Poll::Ready(Ok(()));
            }
            this.gate.tripped.store(true, Ordering::Release);
            return Poll::Ready(Err(io::Error::new(
                io::ErrorKind::InvalidData,
                "a frame before the handshake is over the pre-auth cap",
            )));
        }
        this.scratch.resize(room, 0);
        let mut limited = ReadBuf::new(&mut this.scratch);
        match Pin::new(&mut this.inner).poll_read(cx, &mut limited) {
            Poll::Ready(Ok(())) => {
                let read = limited.filled();
                buf.put_slice(read);
                this.gate.ahead.fetch_add(read.len(), Ordering::AcqRel);
                Poll::Ready(Ok(()))
            }
            other => other,
        }
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Capped<S> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        data: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, data)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncReadExt;

    use super::*;

    #[tokio::test]
    async fn reads_stop_at_the_cap_until_a_message_is_delivered_or_the_cap_lifted() {
        let data = [7u8; 100];
        let gate = Gate::new(10);
        let limit = 10 + frame_overhead(10);
        let mut capped = Capped::new(&data[..], Arc::clone(&gate));
        let mut out = vec![0u8; 100];
        let n = capped.read(&mut out).await.unwrap();
        assert_eq!(n, limit);
        let error = capped.read(&mut out).await.unwrap_err();
        assert_eq!(error.kind(), io::ErrorKind::InvalidData);
        assert!(gate.tripped());
        gate.delivered(10);
        assert_eq!(capped.read(&mut out).await.unwrap(), limit);
        gate.lift();
        assert_eq!(capped.read(&mut out).await.unwrap(), 100 - 2 * limit);
    }

    #[test]
    fn frame_overheads_follow_the_length_encoding() {
        assert_eq!(frame_overhead(125), 6);
        assert_eq!(frame_overhead(126), 8);
        assert_eq!(frame_overhead(65_535), 8);
        assert_eq!(frame_overhead(65_536), 14);
    }
}
