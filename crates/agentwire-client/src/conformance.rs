//! A conformance suite for any Roll runtime command: protocol scenarios run against a fresh
//! runtime process each, per wire version, reported as pass, fail or not applicable
//! ([`Report`]). Scenarios talk raw JSON-RPC NDJSON over the process's stdio where the wire
//! itself is checked (ordering, barriers, frame validity), and the [`crate::roll::RollClient`]
//! where a host's view is. See `docs/conformance.md`.
//!
//! **Invariant:** every frame a runtime writes is validated against the negotiated version's
//! export before a scenario looks at it; an invalid frame fails the scenario, naming the frame
//! and the issue. **Invariant:** a scenario never waits without a bound: a runtime that goes
//! quiet for [`Options::timeout`] while an answer or event is expected fails the scenario, and
//! the scenario as a whole is bounded by [`SCENARIO_TIMEOUT_FACTOR`] times that.

mod report;
mod scenarios;
mod script;
mod wire;

use std::time::{Duration, Instant};

use agentwire_roll::{ProtocolVersion, SUPPORTED_VERSIONS};

pub use report::{Counts, MAX_MESSAGE_CHARS, Outcome, Report, ScenarioResult, escape_controls};
pub use scenarios::Scenario;
pub use script::{CommandLine, CommandLineError, Script, ScriptError, TrimHook};
pub use wire::INBOUND_FRAME_BUDGET;

use scenarios::{Context, Need};

/// Default of [`Options::timeout`] (15 s).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(15);

/// A scenario as a whole may take this many times [`Options::timeout`].
pub const SCENARIO_TIMEOUT_FACTOR: u32 = 20;

/// What to run the suite against and how.
#[derive(Debug, Clone)]
pub struct Options {
    /// The runtime's command line, split into words like a POSIX shell would (quotes,
    /// backslashes) and run without a shell, once per scenario.
    pub command: String,
    /// The versions to test (empty: every supported version). Reported oldest first.
    pub versions: Vec<ProtocolVersion>,
    /// The scenarios to run, by name (empty: all of them).
    pub scenarios: Vec<String>,
    /// The turn inputs that make the runtime's agent ask for approval, ask the user, call a
    /// tool, answer text or write many events.
    pub script: Script,
    /// A command that trims the oldest events of a thread from the runtime's store
    /// (`{thread}` in its words is the thread id); without one the expiry checks are not
    /// applicable.
    pub trim_hook: Option<String>,
    /// The longest the suite waits for the runtime while it expects an answer or a frame.
    pub timeout: Duration,
}

impl Options {
    /// Every scenario on every version against `command`, with the demo agent's script.
    pub fn new(command: impl Into<String>) -> Options {
        Options {
            command: command.into(),
            versions: Vec::new(),
            scenarios: Vec::new(),
            script: Script::default(),
            trim_hook: None,
            timeout: DEFAULT_TIMEOUT,
        }
    }
}

/// Why the suite could not run: usage and spawn errors, never a runtime's failure (that is a
/// [`Outcome::Fail`] in the report).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum ConformanceError {
    /// The runtime command line is empty or cannot be split.
    #[error("the runtime command: {0}")]
    Command(CommandLineError),
    /// The trim hook's command line is empty or cannot be split.
    #[error("the trim hook: {0}")]
    TrimHook(CommandLineError),
    /// A scenario name the suite does not have.
    #[error("no scenario is named {name:?} (scenarios: {known})")]
    UnknownScenario {
        /// The name given.
        name: String,
        /// Every scenario's name.
        known: String,
    },
    /// A zero timeout.
    #[error("the timeout must be at least one millisecond")]
    Timeout,
    /// The runtime could not be started at all.
    #[error("cannot start the runtime {program}: {message}")]
    Spawn {
        /// The program.
        program: String,
        /// The operating system's error.
        message: String,
    },
}

impl ConformanceError {
    /// Stable code.
    pub fn code(&self) -> &'static str {
        match self {
            ConformanceError::Command(_) => "conformance.command",
            ConformanceError::TrimHook(_) => "conformance.trim-hook",
            ConformanceError::UnknownScenario { .. } => "conformance.unknown-scenario",
            ConformanceError::Timeout => "conformance.timeout",
            ConformanceError::Spawn { .. } => "conformance.spawn",
        }
    }
}

/// What [`Suite::run`] reports while it runs.
#[derive(Debug)]
#[non_exhaustive]
pub enum Progress<'a> {
    /// The run starts with this many scenario runs (versions × scenarios, not-applicable ones
    /// included).
    Planned {
        /// Their number.
        total: usize,
    },
    /// A scenario starts on a version.
    Started {
        /// The scenario.
        scenario: &'a Scenario,
        /// The version.
        version: ProtocolVersion,
    },
    /// A scenario finished on a version.
    Finished {
        /// Its result.
        result: &'a ScenarioResult,
    },
}

/// A set of scenarios, in the suite's order.
#[derive(Debug, Clone)]
pub struct Suite {
    scenarios: Vec<&'static Scenario>,
}

impl Suite {
    /// Every scenario.
    pub fn all() -> Suite {
        Suite {
            scenarios: scenarios::ALL.iter().collect(),
        }
    }

    /// The scenarios named (empty: all), in the suite's order.
    ///
    /// # Errors
    /// [`ConformanceError::UnknownScenario`].
    pub fn select<S: AsRef<str>>(names: &[S]) -> Result<Suite, ConformanceError> {
        if names.is_empty() {
            return Ok(Suite::all());
        }
        for name in names {
            let name = name.as_ref();
            if Scenario::named(name).is_none() {
                return Err(ConformanceError::UnknownScenario {
                    name: name.to_owned(),
                    known: scenarios::ALL
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", "),
                });
            }
        }
        Ok(Suite {
            scenarios: scenarios::ALL
                .iter()
                .filter(|s| names.iter().any(|n| n.as_ref() == s.name))
                .collect(),
        })
    }

    /// The scenarios, in order.
    pub fn scenarios(&self) -> &[&'static Scenario] {
        &self.scenarios
    }

    /// Runs every scenario on every version of `options` (version by version, each scenario
    /// against a fresh runtime process; those that need the trim hook after all others) and
    /// reports each result to `progress` as it finishes.
    ///
    /// # Errors
    /// Usage errors found before anything runs ([`ConformanceError::Command`],
    /// [`ConformanceError::TrimHook`], [`ConformanceError::Timeout`]) and
    /// [`ConformanceError::Spawn`] when the runtime cannot be started at all, which stops the
    /// run.
    pub async fn run(
        &self,
        options: &Options,
        progress: &mut (dyn FnMut(Progress<'_>) + Send),
    ) -> Result<Report, ConformanceError> {
        let command = CommandLine::parse(&options.command).map_err(ConformanceError::Command)?;
        let hook = options
            .trim_hook
            .as_deref()
            .map(TrimHook::parse)
            .transpose()
            .map_err(ConformanceError::TrimHook)?;
        if options.timeout.is_zero() {
            return Err(ConformanceError::Timeout);
        }
        let mut versions: Vec<ProtocolVersion> = if options.versions.is_empty() {
            SUPPORTED_VERSIONS.to_vec()
        } else {
            options.versions.clone()
        };
        versions.sort();
        versions.dedup();
        progress(Progress::Planned {
            total: versions.len() * self.scenarios.len(),
        });
        let mut results = Vec::with_capacity(versions.len() * self.scenarios.len());
        // Scenarios that change the runtime's store behind its back (the trim hook) run after
        // all others, so that what they leave behind cannot affect another scenario.
        let (plain, altering): (Vec<&'static Scenario>, Vec<&'static Scenario>) =
            self.scenarios.iter().partition(|s| s.needs.is_none());
        let order = versions
            .iter()
            .flat_map(|v| plain.iter().map(move |s| (*v, *s)))
            .chain(
                versions
                    .iter()
                    .flat_map(|v| altering.iter().map(move |s| (*v, *s))),
            );
        for (version, scenario) in order {
            progress(Progress::Started { scenario, version });
            let context = Context {
                version,
                tested: versions.clone(),
                command: command.clone(),
                script: options.script.clone(),
                trim_hook: hook.clone(),
                timeout: options.timeout,
                deadline: Instant::now() + options.timeout.saturating_mul(SCENARIO_TIMEOUT_FACTOR),
            };
            results.push(run_one(scenario, context).await?);
            if let Some(result) = results.last() {
                progress(Progress::Finished { result });
            }
        }
        Ok(Report::new(
            options.command.clone(),
            versions,
            self.scenarios.clone(),
            results,
        ))
    }
}

/// Runs one scenario on the context's version, or says why it does not apply.
async fn run_one(
    scenario: &'static Scenario,
    context: Context,
) -> Result<ScenarioResult, ConformanceError> {
    let started = Instant::now();
    let version = context.version;
    let outcome = match scenario.not_applicable(version, context.trim_hook.is_some()) {
        Some(reason) => Outcome::Skip { reason },
        None => {
            let program = context.command.program().to_owned();
            match scenarios::run(scenario, context).await {
                Ok(()) => Outcome::Pass,
                Err(failure) => match failure.spawn_error() {
                    Some(message) => {
                        return Err(ConformanceError::Spawn {
                            program,
                            message: message.to_owned(),
                        });
                    }
                    None => Outcome::fail(failure.message()),
                },
            }
        }
    };
    Ok(ScenarioResult {
        scenario: scenario.name,
        version,
        outcome,
        duration: started.elapsed(),
    })
}

/// Runs the scenarios `options` names on its versions.
///
/// # Errors
/// As [`Suite::select`] and [`Suite::run`].
pub async fn run(options: &Options) -> Result<Report, ConformanceError> {
    Suite::select(&options.scenarios)?
        .run(options, &mut |_| {})
        .await
}

impl Scenario {
    /// The scenario named `name`.
    pub fn named(name: &str) -> Option<&'static Scenario> {
        scenarios::ALL.iter().find(|s| s.name == name)
    }

    /// Whether the scenario needs [`Options::trim_hook`] (without one it is not applicable).
    pub fn needs_trim_hook(&self) -> bool {
        self.needs == Some(Need::TrimHook)
    }

    /// Whether the scenario applies to `version` (given whether a trim hook is configured),
    /// and if not, why.
    pub fn not_applicable(&self, version: ProtocolVersion, trim_hook: bool) -> Option<String> {
        if version < self.since || version > self.until {
            return Some(self.outside.to_owned());
        }
        match self.needs {
            Some(Need::TrimHook) if !trim_hook => Some(
                "no --trim-hook was given, so the suite cannot trim this runtime's event log"
                    .to_owned(),
            ),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use agentwire_roll::ServerRequestMethod;
    use agentwire_roll::negotiation::check_advertisement;

    use super::*;

    #[test]
    fn the_suite_may_offer_every_version_with_its_inbound_budget_and_not_with_less() {
        let handlers = [
            ServerRequestMethod::ApprovalRequest,
            ServerRequestMethod::UserInputRequest,
        ];
        let all: Vec<&str> = SUPPORTED_VERSIONS.iter().map(|v| v.as_str()).collect();
        let budget = INBOUND_FRAME_BUDGET as u64;
        assert!(check_advertisement(&all, budget, &handlers).is_ok());
        assert!(check_advertisement(&["1.3"], budget - 1, &handlers).is_err());
        assert!(check_advertisement(&["1.2"], budget - 1, &handlers).is_ok());
    }

    #[test]
    fn every_scenario_is_documented_and_applies_somewhere() {
        let docs = include_str!("../../../docs/conformance.md");
        for scenario in Suite::all().scenarios() {
            assert!(
                docs.contains(&format!("`{}`", scenario.name)),
                "docs/conformance.md does not describe the scenario {}",
                scenario.name
            );
            assert!(scenario.since <= scenario.until, "{}", scenario.name);
            let everywhere =
                scenario.since == ProtocolVersion::V1_0 && scenario.until == ProtocolVersion::V1_5;
            assert_eq!(everywhere, scenario.outside.is_empty(), "{}", scenario.name);
        }
    }

    #[test]
    fn selecting_scenarios_keeps_the_suite_order_and_refuses_unknown_names() {
        let suite = Suite::select(&["resume", "negotiation"]).unwrap();
        let names: Vec<&str> = suite.scenarios().iter().map(|s| s.name).collect();
        assert_eq!(names, ["negotiation", "resume"]);
        let error = Suite::select(&["resumes"]).unwrap_err();
        assert_eq!(error.code(), "conformance.unknown-scenario");
        assert!(
            error.to_string().contains("negotiation, capabilities"),
            "{error}"
        );
    }

    #[test]
    fn not_applicable_says_why() {
        let resume = Scenario::named("resume").unwrap();
        assert_eq!(
            resume
                .not_applicable(ProtocolVersion::V1_2, true)
                .as_deref(),
            Some("runtime.events.resume exists from 1.3")
        );
        assert_eq!(resume.not_applicable(ProtocolVersion::V1_3, false), None);
        let expired = Scenario::named("resume-expired").unwrap();
        assert!(expired.needs_trim_hook());
        assert!(
            expired
                .not_applicable(ProtocolVersion::V1_5, false)
                .unwrap()
                .contains("--trim-hook")
        );
        assert_eq!(expired.not_applicable(ProtocolVersion::V1_5, true), None);
    }
}
