//! The agent's child process: starting it with piped standard streams, writing the queued lines
//! to its standard input, logging its standard error and keeping that error's bounded end for
//! failure messages, and waiting for it to exit or killing it.

use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use agentwire_jsonrpc::{Frame, FrameReader};
use tokio::io::{AsyncRead, AsyncWriteExt as _};
use tokio::process::{Child, ChildStdin, Command};
use tokio::sync::mpsc;
use tracing::Instrument as _;

use agentwire_runtime::{FailStage, TurnContext, TurnEnd};

use crate::protocol::{turn_start, validators};
use crate::session::{Ending, Session};
use crate::{AgentProcessConfig, MAX_QUEUED_INPUT, MAX_STDERR_LINE_BYTES, failed};

/// How long the runtime waits for the rest of the agent's standard error once it exited.
const STDERR_DRAIN: Duration = Duration::from_millis(500);

pub(crate) async fn run(config: &AgentProcessConfig, turn: &TurnContext) -> TurnEnd {
    let validators = match validators() {
        Ok(v) => v,
        Err(message) => return failed(FailStage::Bootstrap, message),
    };
    let program = config.argv.first().map_or("", String::as_str);
    let mut command = Command::new(program);
    command
        .args(config.argv.iter().skip(1))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    // A process group of its own, so that killing the agent kills what it started too.
    #[cfg(unix)]
    command.process_group(0);
    let mut child = match command.spawn() {
        Ok(child) => child,
        Err(e) => {
            return failed(
                FailStage::Bootstrap,
                format!("cannot start the agent command `{program}`: {e}"),
            );
        }
    };
    tracing::debug!(pid = child.id(), "agent process started");
    // However the turn ends (also dropped, as the runtime stops), nothing of the agent's
    // process group outlives it.
    let group = GroupGuard(group_of(&child));
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.start_kill();
        return failed(
            FailStage::Bootstrap,
            "the agent process has no standard streams".into(),
        );
    };
    let tail = Arc::new(Mutex::new(StderrTail::new(config.stderr_tail_bytes)));
    let stderr_task = tokio::spawn(read_stderr(stderr, Arc::clone(&tail)).in_current_span());
    let (input, input_rx) = mpsc::channel(MAX_QUEUED_INPUT);
    tokio::spawn(write_stdin(stdin, input_rx).in_current_span());

    let mut session = Session::new(config, turn, validators, input);
    let start = turn_start(turn);
    let ending = match session.send(&start) {
        Ok(()) => {
            session
                .run(
                    FrameReader::new(stdout, config.max_line_bytes),
                    &mut child,
                    &group,
                )
                .await
        }
        Err(message) => Ending::Failed(message),
    };
    session.finish(ending, child, stderr_task, tail).await
}

/// Writes the queued lines to the agent's standard input; closing the queue closes it.
async fn write_stdin(mut stdin: ChildStdin, mut lines: mpsc::Receiver<Vec<u8>>) {
    while let Some(line) = lines.recv().await {
        let written = async {
            stdin.write_all(&line).await?;
            stdin.flush().await
        }
        .await;
        if let Err(e) = written {
            // The agent closed its input or exited: what it missed is its own loss.
            tracing::debug!("cannot write to the agent's standard input: {e}");
            return;
        }
    }
}

/// The end of the agent's standard error, bounded.
#[derive(Debug)]
pub(crate) struct StderrTail {
    pub(crate) text: String,
    limit: usize,
}

impl StderrTail {
    fn new(limit: usize) -> StderrTail {
        StderrTail {
            text: String::new(),
            limit,
        }
    }

    fn push(&mut self, line: &str) {
        self.text.push_str(line);
        self.text.push('\n');
        if self.text.len() > self.limit {
            let mut cut = self.text.len() - self.limit;
            while !self.text.is_char_boundary(cut) {
                cut += 1;
            }
            self.text.drain(..cut);
        }
    }
}

/// Logs every line of the agent's standard error and keeps its end.
async fn read_stderr(stderr: impl AsyncRead + Unpin, tail: Arc<Mutex<StderrTail>>) {
    let mut reader = FrameReader::new(stderr, MAX_STDERR_LINE_BYTES);
    loop {
        let line = match reader.next_frame().await {
            Ok(Some(Frame::Line(bytes))) => String::from_utf8_lossy(bytes).into_owned(),
            Ok(Some(Frame::Oversize { length })) => {
                format!("[a line of {length} bytes, not shown]")
            }
            Ok(None) => return,
            Err(e) => {
                tracing::debug!("cannot read the agent's standard error: {e}");
                return;
            }
        };
        tracing::info!("agent stderr: {line}");
        tail.lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .push(&line);
    }
}

/// How the process ended, if it does within `grace`.
pub(crate) async fn exit_within(child: &mut Child, grace: Duration) -> Option<ExitStatus> {
    match tokio::time::timeout(grace, child.wait()).await {
        Ok(Ok(status)) => Some(status),
        Ok(Err(e)) => {
            tracing::debug!("cannot wait for the agent process: {e}");
            None
        }
        Err(_) => None,
    }
}

/// Kills the agent and every process of its group (what it started and left running would
/// otherwise outlive the turn, holding the agent's pipes open), then reaps the agent.
pub(crate) async fn kill(child: &mut Child) {
    kill_group(child);
    if let Err(e) = child.kill().await {
        tracing::debug!("cannot kill the agent process: {e}");
    }
}

/// The agent's process group: its id is the agent's pid (the agent leads it).
#[cfg(unix)]
type Group = Option<rustix::process::Pid>;
#[cfg(not(unix))]
type Group = ();

#[cfg(unix)]
fn group_of(child: &Child) -> Group {
    child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
}

#[cfg(not(unix))]
fn group_of(_child: &Child) -> Group {}

#[cfg(unix)]
fn kill_group_of(group: Group) {
    let Some(group) = group else {
        return;
    };
    if let Err(error) = rustix::process::kill_process_group(group, rustix::process::Signal::KILL) {
        tracing::debug!(%error, "cannot kill the agent's process group (it may have ended)");
    }
}

#[cfg(not(unix))]
fn kill_group_of(_group: Group) {}

fn kill_group(child: &Child) {
    kill_group_of(group_of(child));
}

/// Kills the agent's process group when dropped.
pub(crate) struct GroupGuard(Group);

impl GroupGuard {
    /// Kills what is left of the group (the agent may have exited; the group lasts while any
    /// of its processes does).
    pub(crate) fn kill(&self) {
        kill_group_of(self.0);
    }
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        kill_group_of(self.0);
    }
}

/// Waits a little for the rest of standard error (a process the agent started may still hold
/// it open), then stops reading.
pub(crate) async fn drain_stderr(task: tokio::task::JoinHandle<()>) {
    let abort = task.abort_handle();
    if tokio::time::timeout(STDERR_DRAIN, task).await.is_err() {
        abort.abort();
    }
}

/// How a process ended, in words.
pub(crate) fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exited with code {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt as _;
        if let Some(signal) = status.signal() {
            return format!("was killed by signal {signal}");
        }
    }
    format!("ended ({status})")
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn the_stderr_tail_keeps_the_end_within_its_limit() {
        let mut tail = StderrTail::new(10);
        tail.push("first line");
        tail.push("ünïcode");
        assert!(tail.text.len() <= 10, "{:?}", tail.text);
        assert!(tail.text.ends_with("ünïcode\n"));
        let mut none = StderrTail::new(0);
        none.push("x");
        assert_eq!(none.text, "");
    }
}
