//! Stopping a runtime child in the official client's order: close its stdin and wait, then
//! `SIGTERM` and wait, then `SIGKILL` and wait, reporting which step ended it and its exit
//! status.

use std::process::ExitStatus;
use std::time::{Duration, Instant};

use agentwire_jsonrpc::transport::ChildProcess;

use super::error::ClientError;
use super::options::ShutdownTimeouts;

/// Which step of the shutdown ended the runtime.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ShutdownStage {
    /// The client was connected over a stream, not to a child: the connection was closed.
    NoChild,
    /// The runtime exited after its stdin closed.
    StdinClosed,
    /// The runtime exited after `SIGTERM`.
    Terminated,
    /// The runtime exited after `SIGKILL`.
    Killed,
    /// The runtime had not exited within [`ShutdownTimeouts::kill`] after `SIGKILL`.
    Unresponsive,
}

/// How the shutdown went.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShutdownReport {
    /// The step that ended the runtime.
    pub stage: ShutdownStage,
    /// Its exit status (`None` for [`ShutdownStage::NoChild`] and
    /// [`ShutdownStage::Unresponsive`]).
    pub status: Option<ExitStatus>,
    /// The last lines it wrote to stderr.
    pub stderr_tail: String,
}

/// `ChildProcess::shutdown` with this grace is a plain wait.
const UNBOUNDED: Duration = Duration::MAX;

/// Waits up to `limit` for the child to exit.
async fn wait_exit(
    child: &mut ChildProcess,
    limit: Duration,
) -> Result<Option<ExitStatus>, ClientError> {
    let failed = |error: std::io::Error| ClientError::Shutdown(error.to_string());
    match tokio::time::timeout(limit, child.shutdown(UNBOUNDED)).await {
        Ok(result) => result.map(Some).map_err(failed),
        // The wait also reads stderr to its end, which a grandchild holding the pipe can delay
        // past the child's own exit; once the child is reaped its status is kept.
        Err(_) if child.id().is_none() => child
            .shutdown(Duration::ZERO)
            .await
            .map(Some)
            .map_err(failed),
        Err(_) => Ok(None),
    }
}

#[cfg(unix)]
fn terminate(child: &ChildProcess) {
    let Some(pid) = child
        .id()
        .and_then(|id| i32::try_from(id).ok())
        .and_then(rustix::process::Pid::from_raw)
    else {
        return;
    };
    if let Err(error) = rustix::process::kill_process(pid, rustix::process::Signal::TERM) {
        tracing::debug!(%error, "SIGTERM failed (the child may have exited)");
    }
}

#[cfg(not(unix))]
fn terminate(_child: &ChildProcess) {}

/// Runs the rest of the shutdown once the connection (and so the child's stdin) is closed;
/// `stdin_closed_at` is when closing began.
pub(super) async fn stop(
    child: &mut ChildProcess,
    timeouts: ShutdownTimeouts,
    stdin_closed_at: Instant,
) -> Result<ShutdownReport, ClientError> {
    let report = |stage, status: Option<ExitStatus>, child: &ChildProcess| ShutdownReport {
        stage,
        status,
        stderr_tail: child.stderr_tail(),
    };
    let remaining = timeouts.stdin.saturating_sub(stdin_closed_at.elapsed());
    if let Some(status) = wait_exit(child, remaining).await? {
        return Ok(report(ShutdownStage::StdinClosed, Some(status), child));
    }
    tracing::info!(
        pid = child.id(),
        "runtime still running after its stdin closed; sending SIGTERM"
    );
    terminate(child);
    if let Some(status) = wait_exit(child, timeouts.terminate).await? {
        return Ok(report(ShutdownStage::Terminated, Some(status), child));
    }
    tracing::warn!(
        pid = child.id(),
        "runtime still running after SIGTERM; sending SIGKILL"
    );
    // A zero grace kills at once and then waits.
    let killed = tokio::time::timeout(timeouts.kill, child.shutdown(Duration::ZERO)).await;
    let status = match killed {
        Ok(result) => Some(result.map_err(|e| ClientError::Shutdown(e.to_string()))?),
        Err(_) if child.id().is_none() => Some(
            child
                .shutdown(Duration::ZERO)
                .await
                .map_err(|e| ClientError::Shutdown(e.to_string()))?,
        ),
        Err(_) => None,
    };
    Ok(match status {
        Some(status) => report(ShutdownStage::Killed, Some(status), child),
        None => report(ShutdownStage::Unresponsive, None, child),
    })
}
