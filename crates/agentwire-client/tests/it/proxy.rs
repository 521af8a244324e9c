//! The proxy's relay: lines split across reads.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use agentwire_client::proxy::{Direction, FrameReport, Observer, Proxy, ProxyOptions};
use tokio::io::{AsyncRead, ReadBuf};

/// A reader that returns its chunks one read each.
struct Chunks(VecDeque<Vec<u8>>);

impl AsyncRead for Chunks {
    fn poll_read(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        if let Some(chunk) = self.0.pop_front() {
            buf.put_slice(&chunk);
        }
        Poll::Ready(Ok(()))
    }
}

#[derive(Default)]
struct Seen(Mutex<Vec<(u64, Vec<String>)>>);

impl Observer for Seen {
    fn frame(&self, report: &FrameReport<'_>) {
        self.0.lock().unwrap().push((
            report.bytes,
            report.violations.iter().map(|v| v.code.clone()).collect(),
        ));
    }
}

/// A CRLF line of exactly the limit whose `\n` comes in a read of its own is checked, not
/// reported too long.
#[tokio::test]
async fn a_crlf_line_of_exactly_the_limit_split_before_its_lf_is_checked() {
    let line = br#"{"abc":12345}"#;
    let seen = Arc::new(Seen::default());
    let proxy = Proxy::new(ProxyOptions {
        max_line_bytes: line.len(),
        record: None,
        observer: Some(Arc::clone(&seen) as Arc<dyn Observer>),
    });
    let mut first = line.to_vec();
    first.push(b'\r');
    let mut reader = Chunks(VecDeque::from([first, b"\n".to_vec()]));
    let mut out = Vec::new();
    proxy
        .pump(Direction::HostToRuntime, &mut reader, &mut out)
        .await;
    assert_eq!(out, [&line[..], b"\r\n"].concat());
    let seen = seen.0.lock().unwrap();
    assert_eq!(seen.len(), 1);
    let (length, codes) = &seen[0];
    assert_eq!(*length, line.len() as u64);
    // Checked (it is not a Roll frame), not refused as too long.
    assert_eq!(codes, &["proxy.schema"], "{codes:?}");
}
