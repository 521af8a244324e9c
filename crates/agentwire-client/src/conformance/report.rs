//! What a run found: one [`Outcome`] per version and scenario ([`ScenarioResult`]), gathered in
//! a [`Report`] with its JSON form.

use std::time::Duration;

use agentwire_roll::ProtocolVersion;
use serde_json::{Value, json};

use super::scenarios::Scenario;

/// The longest failure message kept, in characters (longer ones end with `…`).
pub const MAX_MESSAGE_CHARS: usize = 4000;

/// How one scenario went on one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Outcome {
    /// Every check held.
    Pass,
    /// A check failed; `message` says which and what the runtime did.
    Fail {
        /// What was wrong, with control characters of the runtime's output escaped.
        message: String,
    },
    /// The scenario does not apply to this version (or needs a hook that was not given); shown
    /// as `n/a` with the reason, never silently.
    Skip {
        /// Why.
        reason: String,
    },
}

impl Outcome {
    /// A failure; control characters in `message` are escaped and its length bounded.
    pub fn fail(message: impl AsRef<str>) -> Outcome {
        Outcome::Fail {
            message: escape_controls(message.as_ref(), MAX_MESSAGE_CHARS),
        }
    }

    /// `pass`, `fail` or `n/a`.
    pub fn label(&self) -> &'static str {
        match self {
            Outcome::Pass => "pass",
            Outcome::Fail { .. } => "fail",
            Outcome::Skip { .. } => "n/a",
        }
    }
}

/// Escapes every control character (and the bidirectional formatting characters a terminal
/// would obey) as `\n`, `\t`, `\r` or `\u{…}`, and keeps at most `max_chars` characters.
pub fn escape_controls(text: &str, max_chars: usize) -> String {
    let mut out = String::with_capacity(text.len().min(max_chars));
    for (kept, c) in text.chars().enumerate() {
        if kept >= max_chars {
            out.push('…');
            break;
        }
        match c {
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() || is_bidi_control(c) => {
                out.push_str(&format!("\\u{{{:x}}}", u32::from(c)));
            }
            c => out.push(c),
        }
    }
    out
}

fn is_bidi_control(c: char) -> bool {
    matches!(c, '\u{200e}' | '\u{200f}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
}

/// One scenario on one version.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ScenarioResult {
    /// The scenario's name.
    pub scenario: &'static str,
    /// The version.
    pub version: ProtocolVersion,
    /// How it went.
    pub outcome: Outcome,
    /// How long it took.
    pub duration: Duration,
}

/// How many results had each outcome.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Counts {
    /// Passed.
    pub pass: usize,
    /// Failed.
    pub fail: usize,
    /// Not applicable.
    pub skip: usize,
}

/// Every result of a run, in the order they ran.
#[derive(Debug, Clone)]
pub struct Report {
    /// The runtime command line.
    pub command: String,
    /// The versions tested, oldest first.
    pub versions: Vec<ProtocolVersion>,
    /// The scenarios run, in the suite's order.
    pub scenarios: Vec<&'static Scenario>,
    /// One result per version and scenario.
    pub results: Vec<ScenarioResult>,
}

impl Report {
    pub(crate) fn new(
        command: String,
        versions: Vec<ProtocolVersion>,
        scenarios: Vec<&'static Scenario>,
        results: Vec<ScenarioResult>,
    ) -> Report {
        Report {
            command,
            versions,
            scenarios,
            results,
        }
    }

    /// Whether nothing failed.
    pub fn passed(&self) -> bool {
        self.counts().fail == 0
    }

    /// The outcomes counted.
    pub fn counts(&self) -> Counts {
        let mut counts = Counts::default();
        for result in &self.results {
            match result.outcome {
                Outcome::Pass => counts.pass += 1,
                Outcome::Fail { .. } => counts.fail += 1,
                Outcome::Skip { .. } => counts.skip += 1,
            }
        }
        counts
    }

    /// The result of `scenario` on `version`.
    pub fn result(&self, scenario: &str, version: ProtocolVersion) -> Option<&ScenarioResult> {
        self.results
            .iter()
            .find(|r| r.scenario == scenario && r.version == version)
    }

    /// The report as JSON (the shape `docs/conformance.md` documents):
    /// `{command, versions, scenarios: [{name, proves, versions}], results: [{scenario,
    /// version, outcome: "pass"|"fail"|"n/a", message?, reason?, durationMs}], summary: {pass,
    /// fail, "n/a"}, passed}`.
    pub fn to_json(&self) -> Value {
        let results: Vec<Value> = self
            .results
            .iter()
            .map(|r| {
                let mut item = json!({
                    "scenario": r.scenario,
                    "version": r.version.as_str(),
                    "outcome": r.outcome.label(),
                });
                match &r.outcome {
                    Outcome::Pass => {}
                    Outcome::Fail { message } => item["message"] = json!(message),
                    Outcome::Skip { reason } => item["reason"] = json!(reason),
                }
                item["durationMs"] =
                    json!(u64::try_from(r.duration.as_millis()).unwrap_or(u64::MAX));
                item
            })
            .collect();
        let scenarios: Vec<Value> = self
            .scenarios
            .iter()
            .map(|s| {
                json!({
                    "name": s.name,
                    "proves": s.proves,
                    "versions": format!("{}-{}", s.since, s.until),
                })
            })
            .collect();
        let counts = self.counts();
        json!({
            "command": self.command,
            "versions": self.versions.iter().map(|v| v.as_str()).collect::<Vec<_>>(),
            "scenarios": scenarios,
            "results": results,
            "summary": {"pass": counts.pass, "fail": counts.fail, "n/a": counts.skip},
            "passed": self.passed(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_characters_are_escaped_and_long_messages_bounded() {
        assert_eq!(
            escape_controls("a\nb\t\u{1b}[31mred\u{202e}", 100),
            "a\\nb\\t\\u{1b}[31mred\\u{202e}"
        );
        assert_eq!(escape_controls("abcdef", 3), "abc…");
        assert_eq!(
            Outcome::fail("bell\u{7}"),
            Outcome::Fail {
                message: "bell\\u{7}".into()
            }
        );
    }
}
