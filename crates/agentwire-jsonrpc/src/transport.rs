//! Byte transports a [`crate::Peer`] runs over: the current process's stdio, a spawned child
//! process (stderr drained into a bounded tail and the log), TCP, Unix sockets and an in-memory
//! pair for tests.

use std::collections::VecDeque;
use std::io;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use std::os::fd::{AsFd as _, BorrowedFd};
use std::os::unix::fs::MetadataExt as _;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, DuplexStream, ReadBuf, ReadHalf, WriteHalf};
use tokio::net::unix::pipe;
use tokio::process::{Child, ChildStdin, ChildStdout, Command};
use tokio::task::JoinHandle;

use crate::framer::{Frame, FrameReader};

/// Bytes of a child's stderr kept for [`ChildProcess::stderr_tail`].
pub const STDERR_TAIL_BYTES: usize = 8 * 1024;
/// Longest stderr line logged whole; longer ones are logged by length only.
pub const STDERR_LOG_LINE_BYTES: usize = 4 * 1024;
/// The capacity [`Stdout`] asks for when stdout is a pipe: Linux's largest for a process
/// without privileges (`/proc/sys/fs/pipe-max-size`), sixteen times its default.
pub const STDOUT_PIPE_BYTES: usize = 1 << 20;
/// Buffer of each direction of [`memory_pair`].
pub const MEMORY_PIPE_BYTES: usize = 64 * 1024;

/// The current process's stdin and stdout. Logs must go to stderr: stdout carries the protocol.
///
/// When stdin or stdout is a pipe (how a host runs an agent), it is read or written without
/// blocking, through the runtime's event loop, like a socket; otherwise (a terminal, a file, a
/// socket) through tokio's blocking-thread stdio. See [`Stdin`] and [`Stdout`].
pub fn stdio() -> (Stdin, Stdout) {
    (Stdin::new(), Stdout::new())
}

/// The current process's stdin ([`stdio`]).
///
/// A pipe is read through a non-blocking duplicate of descriptor 0 registered with the
/// runtime: no thread hand-off per read, and a runtime may stop while stdin is still open.
/// Anything else is read by tokio on a blocking thread that cannot be interrupted, so a process
/// that ends its runtime while such a stdin is still open waits for the next input or its end;
/// a server that stops at end of input (the usual contract) never does.
///
/// Making the pipe non-blocking changes the open pipe itself, so another process that shares
/// this read end (rare: a shell closes its copy) sees it non-blocking too.
#[derive(Debug)]
pub struct Stdin(StdinInner);

#[derive(Debug)]
enum StdinInner {
    Pipe(pipe::Receiver),
    Blocking(tokio::io::Stdin),
}

impl Stdin {
    /// Stdin, as a pipe when it is one and a runtime is running.
    pub fn new() -> Stdin {
        let pipe = tokio::runtime::Handle::try_current()
            .ok()
            .and_then(|_| io::stdin().as_fd().try_clone_to_owned().ok())
            .and_then(|fd| pipe::Receiver::from_owned_fd(fd).ok());
        Stdin(match pipe {
            Some(pipe) => StdinInner::Pipe(pipe),
            None => StdinInner::Blocking(tokio::io::stdin()),
        })
    }

    /// Whether stdin is read as a non-blocking pipe.
    pub fn is_pipe(&self) -> bool {
        matches!(self.0, StdinInner::Pipe(_))
    }
}

impl Default for Stdin {
    fn default() -> Self {
        Stdin::new()
    }
}

impl AsyncRead for Stdin {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            StdinInner::Pipe(pipe) => Pin::new(pipe).poll_read(cx, buf),
            StdinInner::Blocking(stdin) => Pin::new(stdin).poll_read(cx, buf),
        }
    }
}

/// The current process's stdout ([`stdio`]).
///
/// A pipe is written through a non-blocking duplicate of descriptor 1 registered with the
/// runtime, unless stderr is the same pipe (`2>&1`): the non-blocking mode belongs to the open
/// pipe, and the logs written to stderr would then fail with "would block" whenever the pipe is
/// full. Anything else goes through tokio's blocking-thread stdout.
///
/// The pipe's capacity is raised to [`STDOUT_PIPE_BYTES`] where the system allows it (on Linux;
/// elsewhere, or when refused, it stays as it is): a stream of notifications then reaches the
/// host in a sixteenth of the writes and wake-ups.
#[derive(Debug)]
pub struct Stdout(StdoutInner);

#[derive(Debug)]
enum StdoutInner {
    Pipe(pipe::Sender),
    Blocking(tokio::io::Stdout),
}

impl Stdout {
    /// Stdout, as a pipe when it is one, stderr is not the same pipe, and a runtime is
    /// running.
    pub fn new() -> Stdout {
        let pipe = tokio::runtime::Handle::try_current()
            .ok()
            .and_then(|_| io::stdout().as_fd().try_clone_to_owned().ok())
            .filter(|fd| !same_file(fd.as_fd(), io::stderr().as_fd()))
            .and_then(|fd| pipe::Sender::from_owned_fd(fd).ok());
        #[cfg(target_os = "linux")]
        if let Some(pipe) = &pipe {
            // Best effort: a smaller pipe only means more writes.
            let _ = rustix::pipe::fcntl_setpipe_size(pipe, STDOUT_PIPE_BYTES);
        }
        Stdout(match pipe {
            Some(pipe) => StdoutInner::Pipe(pipe),
            None => StdoutInner::Blocking(tokio::io::stdout()),
        })
    }

    /// Whether stdout is written as a non-blocking pipe.
    pub fn is_pipe(&self) -> bool {
        matches!(self.0, StdoutInner::Pipe(_))
    }

    /// The capacity of the pipe in bytes, when stdout is written as one (on Linux).
    pub fn pipe_capacity(&self) -> Option<usize> {
        match &self.0 {
            #[cfg(target_os = "linux")]
            StdoutInner::Pipe(pipe) => rustix::pipe::fcntl_getpipe_size(pipe).ok(),
            _ => None,
        }
    }
}

impl Default for Stdout {
    fn default() -> Self {
        Stdout::new()
    }
}

/// Whether two descriptors refer to the same file (device and inode); an error reads as the
/// same, the cautious answer.
fn same_file(a: BorrowedFd<'_>, b: BorrowedFd<'_>) -> bool {
    let stat = |fd: BorrowedFd<'_>| {
        fd.try_clone_to_owned()
            .and_then(|fd| std::fs::File::from(fd).metadata())
            .map(|m| (m.dev(), m.ino()))
    };
    match (stat(a), stat(b)) {
        (Ok(a), Ok(b)) => a == b,
        _ => true,
    }
}

impl AsyncWrite for Stdout {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match &mut self.get_mut().0 {
            StdoutInner::Pipe(pipe) => Pin::new(pipe).poll_write(cx, buf),
            StdoutInner::Blocking(stdout) => Pin::new(stdout).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            StdoutInner::Pipe(pipe) => Pin::new(pipe).poll_flush(cx),
            StdoutInner::Blocking(stdout) => Pin::new(stdout).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match &mut self.get_mut().0 {
            StdoutInner::Pipe(pipe) => Pin::new(pipe).poll_shutdown(cx),
            StdoutInner::Blocking(stdout) => Pin::new(stdout).poll_shutdown(cx),
        }
    }
}

/// The read and write halves of a TCP connection.
pub fn tcp(
    stream: tokio::net::TcpStream,
) -> (
    tokio::net::tcp::OwnedReadHalf,
    tokio::net::tcp::OwnedWriteHalf,
) {
    stream.into_split()
}

/// The read and write halves of a Unix socket connection.
#[cfg(unix)]
pub fn unix(
    stream: tokio::net::UnixStream,
) -> (
    tokio::net::unix::OwnedReadHalf,
    tokio::net::unix::OwnedWriteHalf,
) {
    stream.into_split()
}

/// One end of an in-memory connection: what it reads and what it writes.
pub type MemoryEnd = (ReadHalf<DuplexStream>, WriteHalf<DuplexStream>);

/// Two connected in-memory ends, each direction buffering [`MEMORY_PIPE_BYTES`].
pub fn memory_pair() -> (MemoryEnd, MemoryEnd) {
    let (a, b) = tokio::io::duplex(MEMORY_PIPE_BYTES);
    (tokio::io::split(a), tokio::io::split(b))
}

/// A child process speaking NDJSON on its stdin and stdout.
///
/// Its stderr is read continuously (an undrained pipe would block the child once full): each
/// line goes to the log (target `agentwire_jsonrpc::child`) and the last
/// [`STDERR_TAIL_BYTES`] bytes are kept for [`ChildProcess::stderr_tail`]. The child is killed
/// when this value is dropped; [`ChildProcess::shutdown`] ends it gracefully.
#[derive(Debug)]
pub struct ChildProcess {
    child: Child,
    tail: Arc<Mutex<VecDeque<u8>>>,
    drain: Option<JoinHandle<()>>,
}

impl ChildProcess {
    /// Spawns `command` with stdin, stdout and stderr piped, and returns it with the pipes to
    /// hand to [`crate::Peer::spawn`] (stdout is what the peer reads, stdin what it writes).
    ///
    /// # Errors
    /// The spawn error.
    pub fn spawn(mut command: Command) -> io::Result<(ChildProcess, ChildStdout, ChildStdin)> {
        command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command.spawn()?;
        let missing = |what: &str| io::Error::other(format!("child {what} was not piped"));
        let stdout = child.stdout.take().ok_or_else(|| missing("stdout"))?;
        let stdin = child.stdin.take().ok_or_else(|| missing("stdin"))?;
        let stderr = child.stderr.take().ok_or_else(|| missing("stderr"))?;
        let tail = Arc::new(Mutex::new(VecDeque::with_capacity(STDERR_TAIL_BYTES)));
        let pid = child.id();
        let drain = tokio::spawn(drain_stderr(stderr, Arc::clone(&tail), pid));
        Ok((
            ChildProcess {
                child,
                tail,
                drain: Some(drain),
            },
            stdout,
            stdin,
        ))
    }

    /// The process id, while the child runs.
    pub fn id(&self) -> Option<u32> {
        self.child.id()
    }

    /// The last bytes the child wrote to stderr (at most [`STDERR_TAIL_BYTES`]), lossily
    /// decoded.
    pub fn stderr_tail(&self) -> String {
        let tail = self.tail.lock().unwrap_or_else(PoisonError::into_inner);
        let (a, b) = tail.as_slices();
        let mut bytes = Vec::with_capacity(a.len() + b.len());
        bytes.extend_from_slice(a);
        bytes.extend_from_slice(b);
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits up to `grace` for the child to exit (close its stdin first, e.g. with
    /// [`crate::Peer::close`]), then kills it. Returns its exit status, once stderr has been
    /// read to the end.
    ///
    /// # Errors
    /// Errors of waiting for or killing the process.
    pub async fn shutdown(&mut self, grace: Duration) -> io::Result<ExitStatus> {
        let status = match tokio::time::timeout(grace, self.child.wait()).await {
            Ok(status) => status?,
            Err(_) => {
                tracing::warn!(
                    pid = self.child.id(),
                    "child did not exit in time; killing it"
                );
                self.child.kill().await?;
                self.child.wait().await?
            }
        };
        if let Some(drain) = self.drain.take() {
            let _ = drain.await;
        }
        Ok(status)
    }
}

async fn drain_stderr(
    stderr: impl AsyncRead + Unpin,
    tail: Arc<Mutex<VecDeque<u8>>>,
    pid: Option<u32>,
) {
    let mut lines = FrameReader::new(stderr, STDERR_LOG_LINE_BYTES);
    loop {
        match lines.next_frame().await {
            Ok(Some(Frame::Line(line))) => {
                tracing::info!(target: "agentwire_jsonrpc::child", pid, line = %String::from_utf8_lossy(line), "child stderr");
                push_tail(&tail, line);
            }
            Ok(Some(Frame::Oversize { length })) => {
                tracing::info!(target: "agentwire_jsonrpc::child", pid, length, "child stderr line too long to log");
                push_tail(&tail, format!("[stderr line of {length} bytes]").as_bytes());
            }
            Ok(None) => return,
            Err(error) => {
                tracing::warn!(target: "agentwire_jsonrpc::child", pid, %error, "reading child stderr failed");
                return;
            }
        }
    }
}

fn push_tail(tail: &Mutex<VecDeque<u8>>, line: &[u8]) {
    let mut tail = tail.lock().unwrap_or_else(PoisonError::into_inner);
    let keep = line.len().min(STDERR_TAIL_BYTES - 1);
    let line = &line[line.len() - keep..];
    while tail.len() + line.len() + 1 > STDERR_TAIL_BYTES {
        tail.pop_front();
    }
    tail.extend(line);
    tail.push_back(b'\n');
}
