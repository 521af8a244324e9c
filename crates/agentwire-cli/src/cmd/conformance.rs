//! `agentwire conformance --stdio 'CMD ARGS'`: runs the Roll conformance suite
//! (`agentwire_client::conformance`) against any runtime command and prints a pass/fail table per
//! version and scenario, or the report as JSON. Exit 0 when everything applicable passed, 1 when
//! a scenario failed, 2 for usage errors and a runtime that cannot be started.

use std::io::{self, IsTerminal as _, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use agentwire_client::conformance::{
    MAX_MESSAGE_CHARS, Options, Outcome, Progress, Report, Script, Suite, escape_controls,
};
use agentwire_roll::ProtocolVersion;
use anyhow::Context as _;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::cmd::Usage;
use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The runtime to test, started afresh for every scenario: its command line, split into
    /// words like a shell would but run without one.
    #[arg(long, value_name = "'CMD ARGS'")]
    stdio: String,
    /// The versions to test, comma-separated (default: 1.0 to 1.5).
    #[arg(long, value_name = "V,V", value_delimiter = ',')]
    versions: Vec<String>,
    /// Run only these scenarios (repeat the flag, or separate names by commas).
    #[arg(long = "scenario", value_name = "NAME", value_delimiter = ',', num_args = 1..)]
    scenarios: Vec<String>,
    /// A JSON object mapping the hooks `text`, `tool`, `approval`, `userInput` and `burst` to
    /// the turn inputs that make the runtime's agent do them (default: the demo agent's
    /// commands).
    #[arg(long, value_name = "FILE")]
    script: Option<PathBuf>,
    /// A command that trims the oldest events of the thread `{thread}` from the runtime's
    /// store (keeping the newest); without it the expiry checks are not applicable.
    #[arg(long, value_name = "'CMD'")]
    trim_hook: Option<String>,
    /// The longest the suite waits for the runtime to answer or write an expected frame; a
    /// scenario as a whole may take 20 times this.
    #[arg(long, value_name = "SECONDS", default_value_t = 15,
          value_parser = clap::value_parser!(u64).range(1..=3600))]
    timeout: u64,
}

fn options(args: Args) -> anyhow::Result<Options> {
    let mut versions = Vec::with_capacity(args.versions.len());
    for text in &args.versions {
        let version = ProtocolVersion::parse(text.trim()).ok_or_else(|| {
            Usage::new(
                "usage.conformance-version",
                format!(
                    "unknown protocol version {text:?} (versions: 1.0, 1.1, 1.2, 1.3, 1.4, 1.5)"
                ),
            )
        })?;
        versions.push(version);
    }
    let script = match &args.script {
        None => Script::default(),
        Some(path) => {
            let bytes = crate::input::read_document(path)?;
            Script::from_json(&bytes)
                .with_context(|| format!("cannot use the script {}", path.display()))?
        }
    };
    Ok(Options {
        command: args.stdio,
        versions,
        scenarios: args.scenarios,
        script,
        trim_hook: args.trim_hook,
        timeout: Duration::from_secs(args.timeout),
    })
}

/// A progress bar on standard error, only when it is a terminal.
struct Bar(Option<ProgressBar>);

impl Bar {
    fn new(format: Format) -> Bar {
        if format == Format::Json || !io::stderr().is_terminal() {
            return Bar(None);
        }
        let bar = ProgressBar::with_draw_target(Some(0), ProgressDrawTarget::stderr());
        if let Ok(style) = ProgressStyle::with_template("{bar:30} {pos}/{len} {elapsed} {msg}") {
            bar.set_style(style);
        }
        Bar(Some(bar))
    }

    fn update(&self, progress: Progress<'_>) {
        let Some(bar) = &self.0 else {
            return;
        };
        match progress {
            Progress::Planned { total } => bar.set_length(total as u64),
            Progress::Started { scenario, version } => {
                bar.set_message(format!("{} on {version}", scenario.name));
            }
            Progress::Finished { .. } => bar.inc(1),
            _ => {}
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let options = options(args)?;
    let suite = Suite::select(&options.scenarios)?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let bar = Bar::new(format);
    let started = Instant::now();
    let report = runtime.block_on(async {
        suite
            .run(&options, &mut |progress| bar.update(progress))
            .await
    });
    bar.finish();
    // The runtimes' processes are gone; what is left of the runtime's tasks may be dropped.
    runtime.shutdown_timeout(Duration::from_secs(1));
    let report = report?;
    match format {
        Format::Json => writeln!(out, "{}", report.to_json())?,
        Format::Human => print_table(&report, started.elapsed(), out)?,
    }
    Ok(if report.passed() {
        output::EXIT_OK
    } else {
        output::EXIT_FOUND
    })
}

fn print_table(report: &Report, took: Duration, out: &mut dyn Write) -> io::Result<()> {
    writeln!(
        out,
        "conformance of {}",
        escape_controls(&report.command, MAX_MESSAGE_CHARS)
    )?;
    let width = report
        .scenarios
        .iter()
        .map(|s| s.name.len())
        .max()
        .unwrap_or(8)
        .max("scenario".len())
        + 2;
    write!(out, "\n{:width$}", "scenario")?;
    for version in &report.versions {
        write!(out, "{:<6}", version.as_str())?;
    }
    writeln!(out)?;
    for scenario in &report.scenarios {
        write!(out, "{:width$}", scenario.name)?;
        for version in &report.versions {
            let cell = match report.result(scenario.name, *version).map(|r| &r.outcome) {
                Some(Outcome::Pass) => "pass",
                Some(Outcome::Fail { .. }) => "FAIL",
                Some(Outcome::Skip { .. }) => "n/a",
                None => "-",
            };
            write!(out, "{cell:<6}")?;
        }
        writeln!(out)?;
    }
    let failures: Vec<_> = report
        .results
        .iter()
        .filter_map(|r| match &r.outcome {
            Outcome::Fail { message } => Some((r, message)),
            _ => None,
        })
        .collect();
    if !failures.is_empty() {
        writeln!(out, "\nfailures:")?;
        for (result, message) in failures {
            writeln!(
                out,
                "  {} on {}: {message}",
                result.scenario, result.version
            )?;
        }
    }
    // Not applicable, one line per scenario and reason with the versions it covers, in the
    // suite's order and then oldest version first.
    let mut skipped: Vec<(usize, &str, Vec<ProtocolVersion>)> = Vec::new();
    for result in &report.results {
        if let Outcome::Skip { reason } = &result.outcome {
            let order = report
                .scenarios
                .iter()
                .position(|s| s.name == result.scenario)
                .unwrap_or(usize::MAX);
            match skipped
                .iter_mut()
                .find(|(o, r, _)| *o == order && *r == reason.as_str())
            {
                Some((_, _, versions)) => versions.push(result.version),
                None => skipped.push((order, reason.as_str(), vec![result.version])),
            }
        }
    }
    for (_, _, versions) in &mut skipped {
        versions.sort();
    }
    skipped.sort_by_key(|(order, _, versions)| (*order, versions.first().copied()));
    if !skipped.is_empty() {
        writeln!(out, "\nnot applicable:")?;
        for (order, reason, versions) in skipped {
            let name = report.scenarios.get(order).map_or("?", |s| s.name);
            let versions: Vec<&str> = versions.iter().map(|v| v.as_str()).collect();
            writeln!(out, "  {name} on {}: {reason}", versions.join(", "))?;
        }
    }
    let counts = report.counts();
    writeln!(
        out,
        "\n{} passed, {} failed, {} not applicable ({:.1} s)",
        counts.pass,
        counts.fail,
        counts.skip,
        took.as_secs_f64()
    )
}
