//! The raw wire driver: one runtime child process, JSON-RPC frames written as NDJSON to its
//! stdin and read from its stdout one by one, each validated against the negotiated version's
//! export and checked for correlation before a scenario sees it, with every wait bounded.
//!
//! **Invariant:** the driver reads at most [`INBOUND_FRAME_BUDGET`] bytes per line and holds
//! at most [`MAX_INBOX_FRAMES`] unread frames ([`MAX_INBOX_BYTES`] bytes); more fails the
//! scenario instead of growing.

//!
//! This module holds the driver's limits, the `Failure` of a scenario and the message helpers,
//! and the `Wire` itself: starting and closing the runtime and writing frames. `frame.rs` holds
//! the frames and answers scenarios look at, `read.rs` the reading of one frame with its
//! validation and correlation, `inbox.rs` the frames read and not yet taken and the waits over
//! them, `calls.rs` the requests with their expected answers and the common openings
//! (`initialize`, the capability handshake, a thread and a turn).

mod calls;
mod frame;
mod inbox;
mod read;
use std::collections::{HashMap, VecDeque};
use std::fmt;
use std::time::{Duration, Instant};

use agentwire_jsonrpc::FrameReader;
use agentwire_jsonrpc::transport::ChildProcess;
use agentwire_roll::constants::MIN_CLIENT_INBOUND_FRAME_BYTES_V13;
use agentwire_roll::{Feature, ProtocolVersion};
use serde_json::{Value, json};
use tokio::io::AsyncWriteExt as _;
use tokio::process::{ChildStdin, ChildStdout};

use super::script::CommandLine;

/// The suite's inbound frame budget: 17 MiB, the least a client advertising 1.3 or newer must
/// accept. Every offer of `initialize` is checked against it.
pub const INBOUND_FRAME_BUDGET: usize = MIN_CLIENT_INBOUND_FRAME_BYTES_V13 as usize;

/// Frames read and not yet taken by a scenario, at most.
pub(crate) const MAX_INBOX_FRAMES: usize = 200_000;
/// Bytes of frames read and not yet taken, at most.
pub(crate) const MAX_INBOX_BYTES: usize = 256 * 1024 * 1024;

/// How much of a frame a message quotes, in characters.
const EXCERPT_CHARS: usize = 400;
/// How much of the runtime's standard error a message quotes, in characters.
const STDERR_CHARS: usize = 600;
/// How long a runtime has to exit once its stdin is closed before it is killed.
const CLOSE_GRACE: Duration = Duration::from_secs(3);

/// Why a scenario failed: a message for the report, or a runtime that cannot be started at
/// all, which stops the run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Failure {
    message: String,
    spawn: bool,
}

impl Failure {
    pub(crate) fn new(message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            spawn: false,
        }
    }

    pub(crate) fn spawn(message: String) -> Failure {
        Failure {
            message,
            spawn: true,
        }
    }

    pub(crate) fn message(&self) -> &str {
        &self.message
    }

    /// The operating system's error when the runtime could not be started.
    pub(crate) fn spawn_error(&self) -> Option<&str> {
        self.spawn.then_some(self.message.as_str())
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

/// Fails the scenario with a formatted message unless the condition holds.
macro_rules! ensure {
    ($cond:expr, $($message:tt)+) => {
        if !$cond {
            return Err($crate::conformance::wire::Failure::new(format!($($message)+)));
        }
    };
}
pub(crate) use ensure;

/// A value as compact JSON, cut at [`EXCERPT_CHARS`] characters.
pub(crate) fn excerpt(value: &Value) -> String {
    cut(&value.to_string(), EXCERPT_CHARS)
}

fn cut(text: &str, chars: usize) -> String {
    match text.char_indices().nth(chars) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_owned(),
    }
}

/// A fresh protocol UUID (v4).
pub(crate) fn uuid() -> String {
    uuid::Uuid::new_v4().to_string()
}

pub(crate) use frame::{Answer, Frame, RpcError, durable, event_type, is_terminal};

/// One runtime process and the frames it wrote.
pub(crate) struct Wire {
    child: ChildProcess,
    stdin: Option<ChildStdin>,
    reader: FrameReader<ChildStdout>,
    /// The version frames are validated under: the one under test, then the negotiated one.
    version: ProtocolVersion,
    next_id: u64,
    /// Requests without an answer read yet, by id, with their method.
    pending: HashMap<u64, String>,
    /// Requests whose answer was read, with their method.
    answered: HashMap<u64, String>,
    inbox: VecDeque<Frame>,
    inbox_bytes: usize,
    frames_read: u64,
    timeout: Duration,
    deadline: Instant,
    /// The `features` of the `initialize` result.
    features: Vec<String>,
}

impl fmt::Debug for Wire {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Wire")
            .field("pid", &self.child.id())
            .field("version", &self.version)
            .field("frames_read", &self.frames_read)
            .finish()
    }
}

impl Wire {
    /// Starts the runtime; frames are validated under `version` until `initialize` answers.
    pub(crate) fn spawn(
        command: &CommandLine,
        version: ProtocolVersion,
        timeout: Duration,
        deadline: Instant,
    ) -> Result<Wire, Failure> {
        let (child, stdout, stdin) = ChildProcess::spawn(command.command())
            .map_err(|error| Failure::spawn(error.to_string()))?;
        Ok(Wire {
            child,
            stdin: Some(stdin),
            reader: FrameReader::new(stdout, INBOUND_FRAME_BUDGET),
            version,
            next_id: 0,
            pending: HashMap::new(),
            answered: HashMap::new(),
            inbox: VecDeque::new(),
            inbox_bytes: 0,
            frames_read: 0,
            timeout,
            deadline,
            features: Vec::new(),
        })
    }

    /// Whether `initialize` announced `feature`.
    pub(crate) fn has_feature(&self, feature: Feature) -> bool {
        self.features.iter().any(|f| f == feature.as_str())
    }

    /// Closes the runtime's stdin and waits briefly for it to exit, then kills it.
    pub(crate) async fn close(mut self) {
        drop(self.stdin.take());
        let _ = tokio::time::timeout(
            CLOSE_GRACE + Duration::from_secs(2),
            self.child.shutdown(CLOSE_GRACE),
        )
        .await;
    }

    fn stderr_note(&self) -> String {
        let tail = self.child.stderr_tail();
        let tail = tail.trim_end();
        if tail.is_empty() {
            return String::new();
        }
        let start = tail
            .char_indices()
            .rev()
            .nth(STDERR_CHARS)
            .map_or(0, |(at, _)| at);
        format!("; its standard error ends with: {}", &tail[start..])
    }

    /// Writes one frame.
    pub(crate) async fn send(&mut self, message: &Value) -> Result<(), Failure> {
        let mut line = message.to_string().into_bytes();
        line.push(b'\n');
        let what = message
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or("a response")
            .to_owned();
        let Some(stdin) = self.stdin.as_mut() else {
            return Err(Failure::new("the runtime's standard input is closed"));
        };
        let write = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        };
        match tokio::time::timeout(self.timeout, write).await {
            Ok(Ok(())) => Ok(()),
            Ok(Err(error)) => Err(Failure::new(format!(
                "writing {what} to the runtime failed ({error}): it closed its standard input{}",
                self.stderr_note()
            ))),
            Err(_) => Err(Failure::new(format!(
                "the runtime did not read {what} within {} ms",
                self.timeout.as_millis()
            ))),
        }
    }

    /// Sends a request; returns its id.
    pub(crate) async fn request(&mut self, method: &str, params: Value) -> Result<u64, Failure> {
        self.next_id += 1;
        let id = self.next_id;
        self.pending.insert(id, method.to_owned());
        self.send(&json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params}))
            .await?;
        Ok(id)
    }

    /// Answers a server request.
    pub(crate) async fn respond(&mut self, id: &Value, result: Value) -> Result<(), Failure> {
        self.send(&json!({"jsonrpc": "2.0", "id": id, "result": result}))
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn excerpts_are_cut_on_character_boundaries() {
        assert_eq!(cut("ééé", 2), "éé…");
        assert_eq!(cut("abc", 3), "abc");
        assert_eq!(excerpt(&json!({"a": 1})), r#"{"a":1}"#);
    }
}
