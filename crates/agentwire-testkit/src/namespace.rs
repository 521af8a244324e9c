//! A loopback-only network namespace with its own `/tmp` and `HOME` in a scratch folder
//! (`tools/ns/loopback.sh`), which several processes of one test share: a gateway and the clients
//! that reach it on 127.0.0.1. Everything that runs the real OpenClaw CLI or gateway runs in one.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};

use crate::missing_tool;
use crate::paths::{repo_root, tools_dir};

const NAMESPACE_TOOLS: &str = "nothing here: unshare and nsenter come with util-linux, ip with \
                               iproute2, and the namespace needs root (or user namespaces)";

/// A network and mount namespace with only `lo`, up; `/tmp` and `HOME` inside the scratch
/// folder [`LoopbackNamespace::scratch`], removed on drop. Processes started with
/// [`LoopbackNamespace::command`] share it, and nothing they do leaves the machine.
#[derive(Debug)]
pub struct LoopbackNamespace {
    // The process that holds the namespaces (`cat`); it ends when this pipe closes, even when
    // the test process dies.
    lifeline: Option<ChildStdin>,
    holder: Child,
    scratch: tempfile::TempDir,
}

fn loopback_script() -> PathBuf {
    repo_root().join("tools").join("ns").join("loopback.sh")
}

impl LoopbackNamespace {
    /// Creates the namespace. `keep` lists paths the processes inside need that may lie under
    /// `/tmp` (a test binary built in a temporary folder): they stay reachable. The repository
    /// and the tools folder always do.
    ///
    /// # Panics
    /// When the namespace cannot be made (no `unshare`, `ip` or `nsenter`, or no permission).
    pub fn new(keep: &[&Path]) -> Self {
        for (program, package) in [
            ("unshare", "util-linux"),
            ("nsenter", "util-linux"),
            ("ip", "iproute2"),
        ] {
            if crate::tools::which(program).is_none() {
                missing_tool(
                    program,
                    NAMESPACE_TOOLS,
                    &format!("`{program}` (Debian package {package}) is not on PATH"),
                );
            }
        }
        let scratch = match tempfile::Builder::new().prefix("agentwire-ns-").tempdir() {
            Ok(dir) => dir,
            Err(error) => panic!("cannot create a scratch folder: {error}"),
        };
        let mut command = Command::new("bash");
        command
            .arg(loopback_script())
            .arg("--scratch")
            .arg(scratch.path());
        for path in [repo_root().as_path(), tools_dir().as_path()]
            .into_iter()
            .chain(keep.iter().copied())
        {
            command.arg("--keep").arg(path);
        }
        // `ready` once the namespace is set up; then it waits on its input.
        command
            .args(["--", "sh", "-c", "echo ready && exec cat"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut holder = match command.spawn() {
            Ok(child) => child,
            Err(error) => panic!("cannot start {command:?}: {error}"),
        };
        let lifeline = holder.stdin.take();
        let mut first = String::new();
        if let Some(stdout) = holder.stdout.take() {
            let _ = BufReader::new(stdout).read_line(&mut first);
        }
        if first.trim() != "ready" {
            let _ = holder.kill();
            let output = holder.wait_with_output();
            let stderr = output
                .map(|o| String::from_utf8_lossy(&o.stderr).into_owned())
                .unwrap_or_default();
            panic!(
                "the loopback namespace did not start ({}): {stderr}",
                loopback_script().display()
            );
        }
        Self {
            lifeline,
            holder,
            scratch,
        }
    }

    /// The scratch folder: `HOME` is `<scratch>/home` and `/tmp` is `<scratch>/tmp` inside.
    pub fn scratch(&self) -> &Path {
        self.scratch.path()
    }

    /// `program` to run inside the namespace (its process id is the program's), with `HOME`,
    /// `TMPDIR` and the XDG folders in the scratch folder and no `OPENCLAW_*` variable.
    pub fn command(&self, program: impl AsRef<OsStr>) -> Command {
        self.command_with_env(&[], program)
    }

    /// As [`LoopbackNamespace::command`], with the variables `env` set inside (the only way to
    /// hand `OPENCLAW_*` variables to the program).
    pub fn command_with_env(&self, env: &[(&str, &str)], program: impl AsRef<OsStr>) -> Command {
        let mut command = Command::new("bash");
        command
            .arg(loopback_script())
            .arg("--enter")
            .arg(self.holder.id().to_string())
            .arg("--scratch")
            .arg(self.scratch.path());
        for (name, value) in env {
            command.arg("--setenv").arg(format!("{name}={value}"));
        }
        command.arg("--").arg(program);
        command
    }

    /// `command` (program, arguments, environment, folder) run inside the namespace, e.g. a
    /// [`crate::python_script`].
    pub fn wrap(&self, command: &Command) -> Command {
        let mut wrapped = self.command(command.get_program());
        wrapped.args(command.get_args());
        for (name, value) in command.get_envs() {
            match value {
                Some(value) => wrapped.env(name, value),
                None => wrapped.env_remove(name),
            };
        }
        if let Some(dir) = command.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    }
}

impl Drop for LoopbackNamespace {
    fn drop(&mut self) {
        drop(self.lifeline.take());
        let _ = self.holder.wait();
    }
}
