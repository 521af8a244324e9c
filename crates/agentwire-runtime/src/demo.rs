//! The scripted demo agent's commands: what a turn's input text asks it to do, parsed without a
//! clock or randomness so every run says the same thing. docs/agent.md lists them.

use serde_json::Value;

use crate::event::FailStage;

/// Most deltas `/slow` streams.
pub const MAX_SLOW_DELTAS: u64 = 1_000;
/// Most operations `/burst` runs.
pub const MAX_BURST_OPERATIONS: u64 = 100_000;
/// Largest message `/big` writes: the durable record limit less room for the envelope.
pub const MAX_BIG_BYTES: u64 = 16 * 1024 * 1024 - 64 * 1024;
/// Most runs `/repeat` asks for.
pub const MAX_REPEAT: u64 = 10;
/// Longest approval explanation the protocol allows.
pub const MAX_EXPLANATION_CHARS: usize = 100;

/// What one turn's input asks the demo agent to do.
#[derive(Debug, Clone, PartialEq)]
pub enum DemoCommand {
    /// Plain text: stream `echo: <text>` in several deltas, then the completed message.
    Echo { text: String },
    /// `/tool NAME JSON`: one tool operation with that input.
    Tool { name: String, input: Value },
    /// `/approve COMMAND`: ask approval to run a shell command, then run it or not.
    Approve { command: String },
    /// `/repeat N COMMAND`: `/approve COMMAND` N times in one turn, each run asked for: the
    /// identical requests an `acceptForTurn` or `acceptForSession` covers.
    Repeat { times: u64, command: String },
    /// `/edit PATH`: ask approval with a file-change diff preview, then apply it or not.
    Edit { path: String },
    /// `/ask QUESTION`: a form with a text and a choice control.
    Ask { question: String },
    /// `/fail STAGE`: the turn fails at that stage.
    Fail { stage: FailStage },
    /// `/slow N`: N deltas, 50 ms apart.
    Slow { deltas: u64 },
    /// `/burst N`: N small tool operations as fast as possible.
    Burst { operations: u64 },
    /// `/big BYTES`: one completed message of that many bytes.
    Big { bytes: u64 },
    /// `/app`: a tool completed with an app-output descriptor.
    App,
    /// `/review [quorum=N] [sod] [hold]`: a durable human task on a deployment (quorum N of
    /// 1..=64, default 1; `sod`: separation of duties); approved, the agent goes on (with
    /// `hold`, it then keeps the turn running until it is interrupted: the state right after
    /// the decision, for tests and demos); declined, the turn fails; cancelled, it is cancelled.
    Review {
        quorum: u8,
        separation_of_duties: bool,
        hold: bool,
    },
    /// A command it does not understand: it answers with the usage, and the turn completes.
    Usage { problem: String },
}

impl DemoCommand {
    /// Reads a turn's input text.
    pub fn parse(text: &str) -> DemoCommand {
        let trimmed = text.trim();
        let Some(rest) = trimmed.strip_prefix('/') else {
            return DemoCommand::Echo {
                text: text.to_owned(),
            };
        };
        let (name, args) = match rest.split_once(char::is_whitespace) {
            Some((name, args)) => (name, args.trim()),
            None => (rest, ""),
        };
        match name {
            "tool" => tool(args),
            "approve" if !args.is_empty() => DemoCommand::Approve {
                command: args.to_owned(),
            },
            "repeat" => repeat(args),
            "edit" if !args.is_empty() => DemoCommand::Edit {
                path: args.to_owned(),
            },
            "ask" if !args.is_empty() => DemoCommand::Ask {
                question: args.to_owned(),
            },
            "fail" => match FailStage::parse(args) {
                Some(stage) => DemoCommand::Fail { stage },
                None => usage(format!(
                    "/fail takes bootstrap, plan or execute, not {args:?}"
                )),
            },
            "slow" => count(args, MAX_SLOW_DELTAS, "/slow N")
                .map_or_else(usage, |deltas| DemoCommand::Slow { deltas }),
            "burst" => count(args, MAX_BURST_OPERATIONS, "/burst N")
                .map_or_else(usage, |operations| DemoCommand::Burst { operations }),
            "big" => count(args, MAX_BIG_BYTES, "/big BYTES")
                .map_or_else(usage, |bytes| DemoCommand::Big { bytes }),
            "app" if args.is_empty() => DemoCommand::App,
            "review" => review(args),
            "approve" | "edit" | "ask" => usage(format!("/{name} needs an argument")),
            "app" => usage("/app takes no argument".into()),
            other => usage(format!("unknown command /{other}")),
        }
    }

    /// The deltas a reply is streamed in: word by word (each keeping its trailing space), so a
    /// host sees several and their concatenation is the whole text.
    pub fn deltas(text: &str) -> Vec<&str> {
        let mut out = Vec::new();
        let mut start = 0;
        for (i, c) in text.char_indices() {
            if c == ' ' {
                out.push(&text[start..=i]);
                start = i + 1;
            }
        }
        if start < text.len() {
            out.push(&text[start..]);
        }
        out
    }

    /// The reply of `Echo`.
    pub fn echo_reply(text: &str) -> String {
        format!("echo: {text}")
    }

    /// The explanation shown with an approval of `command`: at most 100 characters.
    pub fn explanation(command: &str) -> String {
        let text = format!("Runs `{command}` in the workspace shell.");
        if text.chars().count() <= MAX_EXPLANATION_CHARS {
            return text;
        }
        let mut short: String = text.chars().take(MAX_EXPLANATION_CHARS - 1).collect();
        short.push('…');
        short
    }
}

fn tool(args: &str) -> DemoCommand {
    let (name, json) = match args.split_once(char::is_whitespace) {
        Some((name, json)) => (name, json.trim()),
        None => (args, ""),
    };
    if name.is_empty() {
        return usage("/tool NAME JSON needs a tool name".into());
    }
    let input = if json.is_empty() {
        Value::Object(Default::default())
    } else {
        match serde_json::from_str::<Value>(json) {
            Ok(value) => value,
            Err(error) => return usage(format!("/tool {name}: the input is not JSON: {error}")),
        }
    };
    DemoCommand::Tool {
        name: name.to_owned(),
        input,
    }
}

fn repeat(args: &str) -> DemoCommand {
    let (times, command) = args.split_once(char::is_whitespace).unwrap_or((args, ""));
    let command = command.trim();
    match count(times, MAX_REPEAT, "/repeat N COMMAND") {
        Ok(_) if command.is_empty() => usage("/repeat N COMMAND needs a command".into()),
        Ok(times) => DemoCommand::Repeat {
            times,
            command: command.to_owned(),
        },
        Err(problem) => usage(problem),
    }
}

fn review(args: &str) -> DemoCommand {
    let (mut quorum, mut separation_of_duties, mut hold) = (1, false, false);
    for word in args.split_whitespace() {
        match word {
            "sod" => separation_of_duties = true,
            "hold" => hold = true,
            _ => match word.strip_prefix("quorum=").map(str::parse::<u8>) {
                Some(Ok(n)) if (1..=crate::event::MAX_HUMAN_TASK_QUORUM).contains(&n) => {
                    quorum = n;
                }
                Some(_) => {
                    return usage(format!(
                        "/review quorum=N takes a whole number from 1 to 64, not {word:?}"
                    ));
                }
                None => {
                    return usage(format!(
                        "/review takes quorum=N, sod and hold, not {word:?}"
                    ));
                }
            },
        }
    }
    DemoCommand::Review {
        quorum,
        separation_of_duties,
        hold,
    }
}

fn count(args: &str, max: u64, form: &str) -> Result<u64, String> {
    match args.parse::<u64>() {
        Ok(n) if (1..=max).contains(&n) => Ok(n),
        _ => Err(format!(
            "{form} takes a whole number from 1 to {max}, not {args:?}"
        )),
    }
}

fn usage(problem: String) -> DemoCommand {
    DemoCommand::Usage { problem }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeat_takes_a_count_and_a_command() {
        assert_eq!(
            DemoCommand::parse("/repeat 3 ls -la"),
            DemoCommand::Repeat {
                times: 3,
                command: "ls -la".into()
            }
        );
        let problem = |text: &str| match DemoCommand::parse(text) {
            DemoCommand::Usage { problem } => problem,
            other => panic!("{other:?}"),
        };
        assert_eq!(problem("/repeat 3"), "/repeat N COMMAND needs a command");
        assert_eq!(
            problem("/repeat 11 ls"),
            "/repeat N COMMAND takes a whole number from 1 to 10, not \"11\""
        );
        assert_eq!(
            problem("/repeat"),
            "/repeat N COMMAND takes a whole number from 1 to 10, not \"\""
        );
    }
}
