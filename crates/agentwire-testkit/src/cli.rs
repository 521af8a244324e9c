//! Running a command-line binary under test: one builder for arguments, working directory and
//! standard input, whose run fails the test when the program panicked; and the small helpers the
//! command-line tests share (a directory of files, output as text).

use std::ffi::OsStr;
use std::io::Write as _;
use std::path::Path;
use std::process::{Command, Output, Stdio};

use tempfile::TempDir;

/// One run of a binary: build it up, then [`Cli::output`].
///
/// Standard input is closed unless [`Cli::stdin`] gives bytes; they are written from a thread
/// while the output is read, so a program that writes before it has read everything cannot
/// deadlock against the test.
#[derive(Debug)]
pub struct Cli {
    command: Command,
    stdin: Option<Vec<u8>>,
}

impl Cli {
    /// A run of the program at `program` (in the CLI crate's tests:
    /// `env!("CARGO_BIN_EXE_agentwire")`).
    pub fn new(program: impl AsRef<OsStr>) -> Cli {
        Cli {
            command: Command::new(program),
            stdin: None,
        }
    }

    /// Appends arguments.
    pub fn args<I, S>(mut self, args: I) -> Cli
    where
        I: IntoIterator<Item = S>,
        S: AsRef<OsStr>,
    {
        self.command.args(args);
        self
    }

    /// Appends one argument.
    pub fn arg(mut self, arg: impl AsRef<OsStr>) -> Cli {
        self.command.arg(arg);
        self
    }

    /// Runs in `dir` instead of the test's working directory.
    pub fn current_dir(mut self, dir: impl AsRef<Path>) -> Cli {
        self.command.current_dir(dir);
        self
    }

    /// Feeds `bytes` to standard input, then closes it.
    pub fn stdin(mut self, bytes: impl Into<Vec<u8>>) -> Cli {
        self.stdin = Some(bytes.into());
        self
    }

    /// Feeds `bytes` to standard input when given; closed standard input otherwise.
    pub fn stdin_opt(self, bytes: Option<&[u8]>) -> Cli {
        match bytes {
            Some(bytes) => self.stdin(bytes),
            None => self,
        }
    }

    /// Runs the program to completion and returns its output, whatever its exit status.
    ///
    /// # Panics
    /// When the program cannot start, or when its standard error says it panicked: a panic is
    /// never an answer to any input.
    #[track_caller]
    pub fn output(mut self) -> Output {
        self.command
            .stdin(if self.stdin.is_some() {
                Stdio::piped()
            } else {
                Stdio::null()
            })
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = match self.command.spawn() {
            Ok(child) => child,
            Err(error) => panic!("cannot start {:?}: {error}", self.command),
        };
        // The program may exit (or close standard input) before reading everything: a failed
        // write is its answer, not the test's failure.
        let writer = match (self.stdin.take(), child.stdin.take()) {
            (Some(bytes), Some(mut pipe)) => Some(std::thread::spawn(move || {
                let _ = pipe.write_all(&bytes);
            })),
            _ => None,
        };
        let output = match child.wait_with_output() {
            Ok(output) => output,
            Err(error) => panic!("cannot wait for {:?}: {error}", self.command),
        };
        if let Some(writer) = writer {
            let _ = writer.join();
        }
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert!(
            !stderr.contains("panicked"),
            "{:?} panicked:\n{stderr}",
            self.command
        );
        output
    }
}

/// A temporary directory holding `files` (name, contents); deleted when the handle drops.
///
/// # Panics
/// When a file cannot be written.
#[track_caller]
pub fn dir_with(files: &[(&str, &[u8])]) -> TempDir {
    let dir = match tempfile::tempdir() {
        Ok(dir) => dir,
        Err(error) => panic!("cannot create a temporary directory: {error}"),
    };
    for (name, bytes) in files {
        let path = dir.path().join(name);
        if let Err(error) = std::fs::write(&path, bytes) {
            panic!("cannot write {}: {error}", path.display());
        }
    }
    dir
}

/// Bytes a program printed, as text.
///
/// # Panics
/// When they are not UTF-8.
#[track_caller]
pub fn utf8(bytes: &[u8]) -> String {
    match std::str::from_utf8(bytes) {
        Ok(text) => text.to_owned(),
        Err(error) => panic!("output is not UTF-8 ({error}): {bytes:?}"),
    }
}
