//! What the suite runs and types: the runtime's command line ([`CommandLine`]), the trim hook
//! ([`TrimHook`]) and the turn inputs that make the runtime's agent do what a scenario needs
//! ([`Script`]).

use std::process::Stdio;
use std::time::Duration;

use serde_json::Value;
use tokio::io::AsyncReadExt as _;

/// A command line that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum CommandLineError {
    /// Nothing but white space.
    #[error("the command line is empty")]
    Empty,
    /// An unterminated quote or a trailing backslash.
    #[error("cannot split {line:?} into words: {message}")]
    Syntax {
        /// The line.
        line: String,
        /// What is wrong.
        message: String,
    },
}

/// A program and its arguments, split from one line the way a POSIX shell splits words
/// (quotes, backslashes) and run without a shell: `$HOME`, `*`, `|` are plain text.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CommandLine {
    words: Vec<String>,
}

impl CommandLine {
    /// Splits `line`.
    ///
    /// # Errors
    /// [`CommandLineError::Empty`], [`CommandLineError::Syntax`].
    pub fn parse(line: &str) -> Result<CommandLine, CommandLineError> {
        let words = shell_words::split(line).map_err(|e| CommandLineError::Syntax {
            line: line.to_owned(),
            message: e.to_string(),
        })?;
        if words.is_empty() {
            return Err(CommandLineError::Empty);
        }
        Ok(CommandLine { words })
    }

    /// The program (the first word).
    pub fn program(&self) -> &str {
        self.words.first().map_or("", String::as_str)
    }

    /// The arguments.
    pub fn args(&self) -> &[String] {
        self.words.get(1..).unwrap_or_default()
    }

    pub(crate) fn command(&self) -> tokio::process::Command {
        let mut command = tokio::process::Command::new(self.program());
        command.args(self.args());
        command
    }
}

/// How much of a trim hook's standard error a failure quotes.
const HOOK_STDERR_BYTES: u64 = 2048;

/// The command that trims the oldest events of one thread from the runtime's store. Every
/// `{thread}` in its words is replaced by the thread id, which is also in the environment as
/// `AGENTWIRE_CONFORMANCE_THREAD`. It must remove at least the thread's oldest event and keep
/// at least its newest.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TrimHook {
    line: CommandLine,
}

impl TrimHook {
    /// Splits `line`.
    ///
    /// # Errors
    /// As [`CommandLine::parse`].
    pub fn parse(line: &str) -> Result<TrimHook, CommandLineError> {
        Ok(TrimHook {
            line: CommandLine::parse(line)?,
        })
    }

    /// Runs the hook for `thread_id` and waits up to `timeout` for it to exit 0.
    pub(crate) async fn run(&self, thread_id: &str, timeout: Duration) -> Result<(), String> {
        let words: Vec<String> = self
            .line
            .words
            .iter()
            .map(|w| w.replace("{thread}", thread_id))
            .collect();
        let shown = shell_words::join(&words);
        let (program, args) = words.split_first().ok_or("the trim hook is empty")?;
        let mut command = tokio::process::Command::new(program);
        command
            .args(args)
            .env("AGENTWIRE_CONFORMANCE_THREAD", thread_id)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let mut child = command
            .spawn()
            .map_err(|e| format!("the trim hook `{shown}` cannot be started: {e}"))?;
        let stderr = child.stderr.take();
        let finished = async {
            let mut tail = Vec::new();
            if let Some(mut stderr) = stderr {
                let _ = (&mut stderr)
                    .take(HOOK_STDERR_BYTES)
                    .read_to_end(&mut tail)
                    .await;
                // The rest is read and dropped so that the hook never blocks on a full pipe.
                let _ = tokio::io::copy(&mut stderr, &mut tokio::io::sink()).await;
            }
            (child.wait().await, tail)
        };
        match tokio::time::timeout(timeout, finished).await {
            Err(_) => Err(format!(
                "the trim hook `{shown}` did not exit within {} ms",
                timeout.as_millis()
            )),
            Ok((Err(e), _)) => Err(format!("waiting for the trim hook `{shown}` failed: {e}")),
            Ok((Ok(status), _)) if status.success() => Ok(()),
            Ok((Ok(status), tail)) => Err(format!(
                "the trim hook `{shown}` failed ({status}); its standard error: {}",
                String::from_utf8_lossy(&tail).trim_end()
            )),
        }
    }
}

/// Why a script was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ScriptError {
    /// Not a JSON object.
    #[error("a script is a JSON object mapping hooks to turn inputs: {0}")]
    NotAnObject(String),
    /// A key the suite has no hook for.
    #[error("unknown script hook {0:?} (hooks: text, tool, approval, userInput, burst)")]
    UnknownHook(String),
    /// A hook whose value is not a non-empty string.
    #[error("script hook {0:?} must be a non-empty string")]
    NotText(String),
}

impl ScriptError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ScriptError::NotAnObject(_) => "conformance.script.not-an-object",
            ScriptError::UnknownHook(_) => "conformance.script.unknown-hook",
            ScriptError::NotText(_) => "conformance.script.not-text",
        }
    }
}

/// The turn inputs that make the runtime's agent do what a scenario needs. The defaults are the
/// demo agent's commands (`docs/agent.md`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// A turn that answers with text and completes (`hello`).
    pub text: String,
    /// A turn that runs one tool operation and completes (`/tool t {}`).
    pub tool: String,
    /// A turn that asks approval to run a tool and waits for the answer (`/approve ls`).
    pub approval: String,
    /// A turn that asks the user to fill a form and waits for the answer (`/ask Which?`).
    pub user_input: String,
    /// A turn that writes many durable events (`/burst 2000`).
    pub burst: String,
}

impl Default for Script {
    fn default() -> Self {
        Script {
            text: "hello".to_owned(),
            tool: "/tool t {}".to_owned(),
            approval: "/approve ls".to_owned(),
            user_input: "/ask Which?".to_owned(),
            burst: "/burst 2000".to_owned(),
        }
    }
}

impl Script {
    /// Reads a script: a JSON object with any of the keys `text`, `tool`, `approval`,
    /// `userInput` and `burst`, each a non-empty string; missing keys keep their default.
    ///
    /// # Errors
    /// [`ScriptError`].
    pub fn from_json(bytes: &[u8]) -> Result<Script, ScriptError> {
        let value: Value =
            serde_json::from_slice(bytes).map_err(|e| ScriptError::NotAnObject(e.to_string()))?;
        let Value::Object(hooks) = value else {
            return Err(ScriptError::NotAnObject(
                "the document is not an object".to_owned(),
            ));
        };
        let mut script = Script::default();
        for (key, value) in hooks {
            let text = match value.as_str() {
                Some(text) if !text.is_empty() => text.to_owned(),
                _ => return Err(ScriptError::NotText(key)),
            };
            let slot = match key.as_str() {
                "text" => &mut script.text,
                "tool" => &mut script.tool,
                "approval" => &mut script.approval,
                "userInput" => &mut script.user_input,
                "burst" => &mut script.burst,
                _ => return Err(ScriptError::UnknownHook(key)),
            };
            *slot = text;
        }
        Ok(script)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    #[test]
    fn a_command_line_is_split_like_a_shell_without_running_one() {
        let line =
            CommandLine::parse(r#"'/opt/my runtime' serve --store "sqlite:a b" $HOME"#).unwrap();
        assert_eq!(line.program(), "/opt/my runtime");
        assert_eq!(line.args(), ["serve", "--store", "sqlite:a b", "$HOME"]);
        assert_eq!(CommandLine::parse("  "), Err(CommandLineError::Empty));
        assert!(matches!(
            CommandLine::parse("run 'open"),
            Err(CommandLineError::Syntax { .. })
        ));
    }

    #[test]
    fn a_script_overrides_the_hooks_it_names() {
        let script =
            Script::from_json(br#"{"approval": "/approve rm", "userInput": "ask"}"#).unwrap();
        assert_eq!(script.approval, "/approve rm");
        assert_eq!(script.user_input, "ask");
        assert_eq!(script.text, Script::default().text);
        assert_eq!(
            Script::from_json(br#"{"aproval": "x"}"#),
            Err(ScriptError::UnknownHook("aproval".into()))
        );
        assert_eq!(
            Script::from_json(br#"{"text": ""}"#),
            Err(ScriptError::NotText("text".into()))
        );
        assert!(matches!(
            Script::from_json(b"[]"),
            Err(ScriptError::NotAnObject(_))
        ));
    }
}
