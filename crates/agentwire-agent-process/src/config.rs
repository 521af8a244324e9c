//! The agent command and the limits of each turn: [`AgentProcessConfig`], split from a
//! command line the way a shell splits it without running one, and checked before any process
//! starts ([`AgentCommandError`] says why a command or setting is refused).

use std::time::Duration;

use crate::{
    DEFAULT_AGENT_NAME, DEFAULT_CANCEL_GRACE, DEFAULT_EXIT_GRACE, DEFAULT_MAX_GARBAGE_LINES,
    DEFAULT_MAX_LINE_BYTES, DEFAULT_MAX_RUN_EVENTS, DEFAULT_STDERR_TAIL_BYTES,
    DEFAULT_TURN_TIMEOUT,
};

/// Why an agent command or its settings were refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AgentCommandError {
    /// The command line has no program.
    #[error("the agent command is empty")]
    Empty,
    /// The command line cannot be split into words (an unterminated quote, a trailing `\`).
    #[error("the agent command {command:?} cannot be split into words: {reason}")]
    Syntax {
        /// The command line.
        command: String,
        /// What is wrong with it.
        reason: String,
    },
    /// A setting is out of its range.
    #[error("the agent setting {setting} {reason}")]
    Setting {
        /// The setting's name.
        setting: &'static str,
        /// What it must be.
        reason: &'static str,
    },
}

impl AgentCommandError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            AgentCommandError::Empty => "runtime.agent-command-empty",
            AgentCommandError::Syntax { .. } => "runtime.agent-command-syntax",
            AgentCommandError::Setting { .. } => "runtime.agent-setting",
        }
    }
}

/// How to run an agent process and the limits of each turn.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AgentProcessConfig {
    /// The program and its arguments (no shell is involved).
    pub argv: Vec<String>,
    /// The agent name of operations and approvals until a `run:start` names the agent.
    pub name: String,
    /// How long the agent may work on a turn, not counting the time its requests wait for the
    /// host (they have their own deadline); then it is killed and the turn fails.
    pub turn_timeout: Duration,
    /// The longest line the agent may write; a longer one fails the turn.
    pub max_line_bytes: usize,
    /// How many lines that are not agent protocol messages a turn tolerates; one more fails it.
    pub max_garbage_lines: usize,
    /// How many run events one turn may write; one more fails it.
    pub max_run_events: usize,
    /// How much of the end of the agent's standard error a failure message quotes.
    pub stderr_tail_bytes: usize,
    /// How long a cancelled agent has to end its turn before it is killed.
    pub cancel_grace: Duration,
    /// How long the agent has to exit after `turn.end` (or after closing its output).
    pub exit_grace: Duration,
}

impl Default for AgentProcessConfig {
    fn default() -> Self {
        AgentProcessConfig {
            argv: Vec::new(),
            name: DEFAULT_AGENT_NAME.to_owned(),
            turn_timeout: DEFAULT_TURN_TIMEOUT,
            max_line_bytes: DEFAULT_MAX_LINE_BYTES,
            max_garbage_lines: DEFAULT_MAX_GARBAGE_LINES,
            max_run_events: DEFAULT_MAX_RUN_EVENTS,
            stderr_tail_bytes: DEFAULT_STDERR_TAIL_BYTES,
            cancel_grace: DEFAULT_CANCEL_GRACE,
            exit_grace: DEFAULT_EXIT_GRACE,
        }
    }
}

impl AgentProcessConfig {
    /// The default settings for a command line `'CMD ARGS'` (the `--agent-cmd` flag), split
    /// into words the way a POSIX shell splits them (quotes and backslashes), without running
    /// a shell: no variables, globs, pipes or redirections.
    pub fn from_command_line(line: &str) -> Result<AgentProcessConfig, AgentCommandError> {
        let argv = shell_words::split(line).map_err(|e| AgentCommandError::Syntax {
            command: line.to_owned(),
            reason: e.to_string(),
        })?;
        let config = AgentProcessConfig {
            argv,
            ..AgentProcessConfig::default()
        };
        config.check()?;
        Ok(config)
    }

    /// Checks the command and the settings.
    pub fn check(&self) -> Result<(), AgentCommandError> {
        if self.argv.first().is_none_or(String::is_empty) {
            return Err(AgentCommandError::Empty);
        }
        let positive = |setting, ok: bool| {
            if ok {
                Ok(())
            } else {
                Err(AgentCommandError::Setting {
                    setting,
                    reason: "must be more than zero",
                })
            }
        };
        positive("name", !self.name.is_empty())?;
        positive("turn_timeout", !self.turn_timeout.is_zero())?;
        positive("max_line_bytes", self.max_line_bytes > 0)?;
        positive("max_run_events", self.max_run_events > 0)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;
    use crate::AgentProcess;

    #[test]
    fn a_command_line_splits_like_a_shell_without_one() {
        let config =
            AgentProcessConfig::from_command_line(r#"python3 "my agent.py" --name 'a b' x\ y"#)
                .unwrap();
        assert_eq!(
            config.argv,
            ["python3", "my agent.py", "--name", "a b", "x y"]
        );
        assert_eq!(config.turn_timeout, DEFAULT_TURN_TIMEOUT);
        // Shell syntax is not interpreted: it is an argument like any other.
        let config = AgentProcessConfig::from_command_line("agent $HOME | tee log").unwrap();
        assert_eq!(config.argv, ["agent", "$HOME", "|", "tee", "log"]);
    }

    #[test]
    fn bad_command_lines_and_settings_are_refused_with_a_code() {
        for line in ["", "   ", "''"] {
            let e = AgentProcessConfig::from_command_line(line).unwrap_err();
            assert_eq!(e, AgentCommandError::Empty, "{line:?}");
            assert_eq!(e.code(), "runtime.agent-command-empty");
        }
        let e = AgentProcessConfig::from_command_line("python3 'agent.py").unwrap_err();
        assert_eq!(e.code(), "runtime.agent-command-syntax");
        assert_eq!(
            e.to_string(),
            "the agent command \"python3 'agent.py\" cannot be split into words: missing closing quote"
        );
        let e = AgentProcess::new(AgentProcessConfig {
            argv: vec!["agent".into()],
            max_line_bytes: 0,
            ..AgentProcessConfig::default()
        })
        .unwrap_err();
        assert_eq!(
            e.to_string(),
            "the agent setting max_line_bytes must be more than zero"
        );
        assert_eq!(e.code(), "runtime.agent-setting");
    }
}
