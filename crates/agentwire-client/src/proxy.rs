//! A protocol tap between a Roll host and a runtime: [`Proxy`] forwards every NDJSON line both
//! ways unchanged, learns the negotiated version from the `initialize` pair, checks each frame
//! against that version's schema (before negotiation, against the newest), tells an
//! [`Observer`] what it found and records the session ([`Recorder`], read back as
//! [`Record`]s). See `docs/proxy.md`.
//!
//! **Invariant:** what one side writes reaches the other byte for byte, in order, one whole line
//! at a time and as soon as the line is checked; nothing waits for anything but its own line.
//! A line over the limit is forwarded as it arrives and reported, never held.

mod inspect;
mod record;
mod relay;

use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, SystemTime};

use agentwire_jsonrpc::ROLL_CLIENT_MAX_INBOUND_FRAME;
use agentwire_roll::{LATEST_VERSION, schema};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::process::Command;

pub use inspect::{
    Direction, FrameInfo, FrameKind, Inspection, MAX_ISSUES_PER_FRAME, MAX_PENDING_REQUESTS,
    MAX_REMEMBERED_BYTES, Session, Violation, ViolationKind,
};
pub use record::{Content, Record, Recorder, parse_timestamp, timestamp};
pub use relay::PumpEnd;

/// The default line limit: 17 MiB, the inbound budget a Roll client needs for 1.3 and newer.
pub const DEFAULT_MAX_LINE_BYTES: usize = ROLL_CLIENT_MAX_INBOUND_FRAME;

/// How long the runtime's output may stay open after the runtime exited (a process it started
/// may hold it) before the proxy stops reading it.
pub const OUTPUT_GRACE: Duration = Duration::from_secs(5);

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(PoisonError::into_inner)
}

/// One frame as the proxy saw it, handed to the [`Observer`] before the frame is forwarded.
#[derive(Debug, Clone, Copy)]
pub struct FrameReport<'a> {
    /// When it was checked and recorded (the time of its record).
    pub at: SystemTime,
    /// Which way it goes.
    pub direction: Direction,
    /// Its length in bytes, without the line ending.
    pub bytes: u64,
    /// What it is (`FrameKind::Other` for a line that is not JSON or is over the limit).
    pub info: &'a FrameInfo,
    /// What is wrong with it.
    pub violations: &'a [Violation],
}

/// Told about every frame (from both directions' tasks, one frame at a time each).
pub trait Observer: Send + Sync {
    /// A frame was read and checked; it is forwarded after this returns.
    fn frame(&self, report: &FrameReport<'_>);

    /// Writing the recording failed; recording stopped, forwarding goes on.
    fn record_failed(&self, error: &io::Error) {
        let _ = error;
    }
}

/// How a proxy runs.
pub struct ProxyOptions {
    /// The longest line checked and recorded, without its line ending (17 MiB). A longer one
    /// is forwarded as it arrives and reported as `proxy.line-too-long`.
    pub max_line_bytes: usize,
    /// Where the session is recorded (none by default).
    pub record: Option<Box<dyn io::Write + Send>>,
    /// Who is told about each frame.
    pub observer: Option<Arc<dyn Observer>>,
}

impl Default for ProxyOptions {
    fn default() -> Self {
        ProxyOptions {
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            record: None,
            observer: None,
        }
    }
}

impl std::fmt::Debug for ProxyOptions {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProxyOptions")
            .field("max_line_bytes", &self.max_line_bytes)
            .field("record", &self.record.is_some())
            .field("observer", &self.observer.is_some())
            .finish()
    }
}

/// Counters of a session.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ProxyStats {
    /// Frames from the host (lines over the limit included, blank lines not).
    pub host_to_runtime: u64,
    /// Frames from the runtime.
    pub runtime_to_host: u64,
    /// Frames with at least one violation.
    pub frames_with_violations: u64,
    /// Violations in all.
    pub violations: u64,
}

/// Why [`Proxy::run_child`] could not run the session.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ProxyError {
    /// The runtime could not be started.
    #[error("cannot start the runtime `{program}`: {source}")]
    Spawn {
        /// The program.
        program: String,
        /// Why.
        #[source]
        source: io::Error,
    },
    /// Waiting for the runtime failed.
    #[error("cannot wait for the runtime: {0}")]
    Wait(#[source] io::Error),
}

impl ProxyError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ProxyError::Spawn { .. } => "client.proxy.spawn",
            ProxyError::Wait(_) => "client.proxy.wait",
        }
    }
}

/// How a session ended.
#[derive(Debug)]
pub struct ProxyOutcome {
    /// The runtime's exit status.
    pub status: ExitStatus,
    /// How the runtime's output ended (`None`: still open [`OUTPUT_GRACE`] after the runtime
    /// exited).
    pub runtime_output: Option<PumpEnd>,
    /// The counters.
    pub stats: ProxyStats,
    /// The error that stopped the recording, if one did.
    pub record_error: Option<io::Error>,
}

/// One proxied session: the [`Session`] both directions share, the recording and the
/// observer.
pub struct Proxy {
    session: Session,
    max_line_bytes: usize,
    recorder: Mutex<Option<Recorder>>,
    record_error: Mutex<Option<io::Error>>,
    observer: Option<Arc<dyn Observer>>,
    stats: Mutex<ProxyStats>,
}

impl std::fmt::Debug for Proxy {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Proxy")
            .field("session", &self.session)
            .field("max_line_bytes", &self.max_line_bytes)
            .field("stats", &self.stats())
            .finish_non_exhaustive()
    }
}

impl Proxy {
    /// A proxy for one session.
    pub fn new(options: ProxyOptions) -> Arc<Proxy> {
        Arc::new(Proxy {
            session: Session::new(),
            max_line_bytes: options.max_line_bytes,
            recorder: Mutex::new(options.record.map(Recorder::new)),
            record_error: Mutex::new(None),
            observer: options.observer,
            stats: Mutex::new(ProxyStats::default()),
        })
    }

    /// What the proxy knows about the session (the negotiated version).
    pub fn session(&self) -> &Session {
        &self.session
    }

    /// The counters so far.
    pub fn stats(&self) -> ProxyStats {
        *lock(&self.stats)
    }

    /// Takes the error that stopped the recording, if one did.
    pub fn take_record_error(&self) -> Option<io::Error> {
        lock(&self.record_error).take()
    }

    /// Starts `command` as the runtime (its standard input and output piped to the proxy, its
    /// standard error left as the command has it) and proxies `host_in`/`host_out` to it until
    /// the session ends: when the host's input ends, the runtime's input is closed and the
    /// proxy waits for it to exit; when the host stops reading, the same, with the runtime's
    /// output drained meanwhile; when the runtime exits, its remaining output is forwarded
    /// (for up to [`OUTPUT_GRACE`]) and the session ends.
    ///
    /// # Errors
    /// [`ProxyError::Spawn`], [`ProxyError::Wait`].
    pub async fn run_child<R, W>(
        self: &Arc<Self>,
        mut command: Command,
        mut host_in: R,
        mut host_out: W,
    ) -> Result<ProxyOutcome, ProxyError>
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send,
    {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .kill_on_drop(true);
        let program = command
            .as_std()
            .get_program()
            .to_string_lossy()
            .into_owned();
        let mut child = command.spawn().map_err(|source| ProxyError::Spawn {
            program: program.clone(),
            source,
        })?;
        let (Some(mut runtime_in), Some(mut runtime_out)) =
            (child.stdin.take(), child.stdout.take())
        else {
            return Err(ProxyError::Spawn {
                program,
                source: io::Error::other("the runtime's standard input or output is not a pipe"),
            });
        };
        // The first frame of each version compiles its validator; the newest one checks the
        // first frames, so it is compiled while the runtime starts.
        tokio::task::spawn_blocking(|| schema::is_valid(LATEST_VERSION, &serde_json::Value::Null));
        let proxy = Arc::clone(self);
        let host_side = tokio::spawn(async move {
            let end = proxy
                .pump(Direction::HostToRuntime, &mut host_in, &mut runtime_in)
                .await;
            // Closes the runtime's input.
            drop(runtime_in);
            end
        });
        let close_runtime_input = host_side.abort_handle();
        let runtime_side = async {
            let end = self
                .pump(Direction::RuntimeToHost, &mut runtime_out, &mut host_out)
                .await;
            if let PumpEnd::WriteFailed(_) = &end {
                // The host stopped reading: the runtime's input is closed and its output
                // drained, so it is never blocked writing while it winds down.
                close_runtime_input.abort();
                let _ = tokio::io::copy(&mut runtime_out, &mut tokio::io::sink()).await;
            }
            end
        };
        tokio::pin!(runtime_side);
        let (runtime_output, status) = tokio::select! {
            end = &mut runtime_side => (Some(end), child.wait().await),
            status = child.wait() => {
                let end = tokio::time::timeout(OUTPUT_GRACE, &mut runtime_side).await.ok();
                (end, status)
            }
        };
        // The host's input may never end; the session has.
        host_side.abort();
        let status = status.map_err(ProxyError::Wait)?;
        Ok(ProxyOutcome {
            status,
            runtime_output,
            stats: self.stats(),
            record_error: self.take_record_error(),
        })
    }

    fn count(&self, direction: Direction, violations: usize) {
        let mut stats = lock(&self.stats);
        match direction {
            Direction::HostToRuntime => stats.host_to_runtime += 1,
            Direction::RuntimeToHost => stats.runtime_to_host += 1,
        }
        if violations > 0 {
            stats.frames_with_violations += 1;
            stats.violations += violations as u64;
        }
    }

    /// Records a frame about to be forwarded and returns its time. The time is taken under the
    /// recording's lock, so records are in the order the frames were forwarded and their times
    /// never go back, whatever the two directions' checks cost.
    fn record(
        &self,
        direction: Direction,
        content: Content<'_>,
        violations: &[Violation],
    ) -> SystemTime {
        let mut recorder = lock(&self.recorder);
        let at = SystemTime::now();
        let Some(active) = recorder.as_mut() else {
            return at;
        };
        if let Err(error) = active.write(at, direction, content, violations) {
            *recorder = None;
            if let Some(observer) = &self.observer {
                observer.record_failed(&error);
            }
            lock(&self.record_error).get_or_insert(error);
        }
        at
    }

    /// A whole line was read and inspected; it is forwarded next.
    fn seen(&self, direction: Direction, text: &[u8], inspection: &Inspection) {
        self.count(direction, inspection.violations.len());
        let content = if inspection.frame.is_some() {
            Content::Frame(text)
        } else {
            Content::Raw(text)
        };
        let at = self.record(direction, content, &inspection.violations);
        if let Some(observer) = &self.observer {
            observer.frame(&FrameReport {
                at,
                direction,
                bytes: text.len() as u64,
                info: &inspection.info,
                violations: &inspection.violations,
            });
        }
    }

    /// A line over the limit ended (it was forwarded as it arrived).
    fn oversize(&self, direction: Direction, length: u64) {
        let violations = [Violation::new(
            ViolationKind::LineTooLong,
            format!(
                "a line of {length} bytes, over the proxy's limit of {} bytes: forwarded, not checked",
                self.max_line_bytes
            ),
        )];
        self.count(direction, violations.len());
        let at = self.record(direction, Content::Oversize(length), &violations);
        if let Some(observer) = &self.observer {
            observer.frame(&FrameReport {
                at,
                direction,
                bytes: length,
                info: &FrameInfo {
                    kind: FrameKind::Other,
                    id: None,
                    method: None,
                },
                violations: &violations,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::expect_used)]

    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    #[derive(Default)]
    struct Seen(Mutex<Vec<(Direction, u64, Vec<String>)>>);

    impl Observer for Seen {
        fn frame(&self, report: &FrameReport<'_>) {
            lock(&self.0).push((
                report.direction,
                report.bytes,
                report.violations.iter().map(|v| v.code.clone()).collect(),
            ));
        }
    }

    /// Pumps `input` through a proxy with a `max`-byte line limit, fed in `chunk`-byte writes.
    async fn pumped(input: &[u8], max: usize, chunk: usize) -> (Vec<u8>, Arc<Seen>) {
        let seen = Arc::new(Seen::default());
        let proxy = Proxy::new(ProxyOptions {
            max_line_bytes: max,
            record: None,
            observer: Some(Arc::clone(&seen) as Arc<dyn Observer>),
        });
        let (mut feed, mut reader) = tokio::io::duplex(16);
        let (mut writer, mut out) = tokio::io::duplex(1 << 20);
        let input = input.to_vec();
        let feeder = tokio::spawn(async move {
            for piece in input.chunks(chunk) {
                feed.write_all(piece).await.unwrap();
            }
        });
        let end = proxy
            .pump(Direction::HostToRuntime, &mut reader, &mut writer)
            .await;
        assert!(matches!(end, PumpEnd::Eof), "{end:?}");
        feeder.await.unwrap();
        drop(writer);
        let mut forwarded = Vec::new();
        out.read_to_end(&mut forwarded).await.unwrap();
        (forwarded, seen)
    }

    #[tokio::test]
    async fn every_byte_is_forwarded_and_each_line_inspected() {
        let input = b"{\"a\":1}\r\n\n   \n{not json}\n{\"b\":2}";
        for chunk in [1, 3, 64] {
            let (forwarded, seen) = pumped(input, 1024, chunk).await;
            assert_eq!(forwarded, input, "chunk {chunk}");
            let seen = lock(&seen.0);
            let lengths: Vec<u64> = seen.iter().map(|s| s.1).collect();
            assert_eq!(lengths, [7, 10, 7], "blank lines are not frames");
            assert!(seen[1].2.contains(&"proxy.not-json".to_owned()));
        }
    }

    #[tokio::test]
    async fn a_line_over_the_limit_is_forwarded_and_reported_with_its_length() {
        let long = format!("{{\"x\":\"{}\"}}", "y".repeat(100));
        let input = format!("{long}\r\n{{\"a\":1}}\n{long}");
        for chunk in [1, 7, 4096] {
            let (forwarded, seen) = pumped(input.as_bytes(), 32, chunk).await;
            assert_eq!(forwarded, input.as_bytes(), "chunk {chunk}");
            let seen = lock(&seen.0);
            let report: Vec<(u64, bool)> = seen
                .iter()
                .map(|s| (s.1, s.2.contains(&"proxy.line-too-long".to_owned())))
                .collect();
            let length = long.len() as u64;
            assert_eq!(report, [(length, true), (7, false), (length, true)]);
        }
    }

    #[tokio::test]
    async fn a_line_of_exactly_the_limit_is_checked_with_either_ending() {
        let line = br#"{"abc":12345}"#;
        for ending in [&b"\n"[..], b"\r\n"] {
            let input = [&line[..], ending].concat();
            let (forwarded, seen) = pumped(&input, line.len(), 1).await;
            assert_eq!(forwarded, input);
            let seen = lock(&seen.0);
            assert_eq!(seen.len(), 1);
            assert!(!seen[0].2.contains(&"proxy.line-too-long".to_owned()));
        }
    }
}
