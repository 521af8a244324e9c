//! The `agentwire` command: a thin layer over the library crates. Every command prints a report
//! for people by default and JSON with `--format json`.
//!
//! Exit codes: 0 success (everything valid, nothing to report); 1 the command ran and found
//! something (an invalid message, a lint error, a stale file, a breaking change); 2 usage, I/O or
//! schema errors that stopped the command, or a validation a limit stopped before it could
//! decide; 141 standard output closed by its reader.

mod cmd;
mod input;
mod output;
mod passes;
mod protocols;

use std::io::{self, Write};
use std::process::ExitCode;

use anyhow::Context;
use clap::{Parser, Subcommand};

use crate::output::Format;

/// mimalloc: a runtime serving a burst allocates and frees a few small buffers per event on
/// several threads at once, where glibc's malloc spent about a third of the workers' time
/// (measured with `perf` on `scripts/bench.sh --serve`; docs/PERFORMANCE.md).
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Toolkit for agent protocols: schemas, validation, bindings, compatibility and run logs.
#[derive(Debug, Parser)]
#[command(name = "agentwire", version, about, propagate_version = true)]
struct Cli {
    /// Output for people (`human`, the default) or for programs (`json`).
    #[arg(long, global = true, value_enum, default_value_t = Format::Human)]
    format: Format,
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Frozen compatibility baselines: `baseline freeze SCHEMA --out FILE`.
    #[command(subcommand_required = true)]
    Baseline(cmd::baseline::Args),
    /// Compare two schema documents: every change, breaking or additive (exit 1 if any breaks).
    Compat(cmd::compat::Args),
    /// The system end to end: the reference runtime on the embedded SQLite store, driven by a
    /// Roll host through an approval, printed as a timeline.
    Demo(cmd::demo::Args),
    /// Run the Roll conformance suite against a runtime command (`conformance --stdio 'CMD'`):
    /// pass or fail per version and scenario (exit 1 if any fails).
    Conformance(cmd::conformance::Args),
    /// Print the protocol digest (`sha256:` of canonical text + "\n") of a schema document.
    Digest(cmd::digest::Args),
    /// The durable event log: `events inspect|tail|trim --store sqlite:PATH|postgres://…`.
    #[command(subcommand_required = true)]
    Events(cmd::events::Args),
    /// Rewrite a JSON document in canonical text (JSON.stringify(value, null, 2)).
    Fmt(cmd::fmt::Args),
    /// Project NDJSON messages of one wire version down to an older one (docs/versions.md).
    Project(cmd::project::Args),
    /// A checking proxy between a Roll host and a runtime (`proxy --stdio 'CMD ARGS' [--record
    /// FILE]`), and recorded sessions as timelines (`proxy replay FILE`).
    Proxy(cmd::proxy::Args),
    /// Generate typed bindings (rust, ts, py, kt, swift) from a schema, or check them with --check.
    Gen(cmd::r#gen::Args),
    /// Lint a schema document: every finding with a stable code (exit 1 on any error).
    Lint(cmd::lint::Args),
    /// TaskLens run logs: coerce, derive the run state, view a timeline, print mock runs.
    #[command(subcommand_required = true)]
    Runlog(cmd::runlog::Args),
    /// Schema documents as a whole: `schema export --draft 07|2020-12 FILE [--out FILE]`.
    #[command(subcommand_required = true)]
    Schema(cmd::schema::Args),
    /// Run the reference runtime: the Roll Runtime Protocol 1.0-1.5 on stdio (`serve --stdio`).
    Serve(cmd::serve::Args),
    /// Validate messages (documents or NDJSON streams) against a schema or one of its definitions.
    // `--version` names a protocol version here, so the subcommand has no version flag.
    #[command(disable_version_flag = true)]
    Validate(cmd::validate::Args),
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        Err(err) => {
            let _ = err.print();
            return match err.kind() {
                clap::error::ErrorKind::DisplayHelp | clap::error::ErrorKind::DisplayVersion => {
                    ExitCode::SUCCESS
                }
                _ => ExitCode::from(output::EXIT_ERROR),
            };
        }
    };
    let format = cli.format;
    // A server and the stdio proxy speak a protocol on standard output: their fatal error,
    // JSON or not, goes to standard error.
    let protocol_stdout = match &cli.command {
        Command::Serve(_) => true,
        Command::Proxy(args) => args.speaks_on_stdout(),
        _ => false,
    };
    let mut out = output::stdout();
    let result = run(cli, &mut out).and_then(|code| {
        out.flush().context("cannot write standard output")?;
        Ok(code)
    });
    match result {
        Ok(code) => ExitCode::from(code),
        // The reader went away: nothing more can be said to it, and nothing is wrong to report.
        Err(err) if output::is_broken_pipe(&err) => ExitCode::from(output::EXIT_BROKEN_PIPE),
        Err(err) => {
            if protocol_stdout {
                output::print_fatal(&err, format, &mut io::stderr());
            } else {
                output::print_fatal(&err, format, &mut out);
            }
            ExitCode::from(output::EXIT_ERROR)
        }
    }
}

fn run(cli: Cli, out: &mut dyn Write) -> anyhow::Result<u8> {
    let format = cli.format;
    match cli.command {
        Command::Baseline(args) => cmd::baseline::run(args, format, out),
        Command::Compat(args) => cmd::compat::run(args, format, out),
        Command::Demo(args) => cmd::demo::run(args, format, out),
        Command::Conformance(args) => cmd::conformance::run(args, format, out),
        Command::Digest(args) => cmd::digest::run(args, format, out),
        Command::Events(args) => cmd::events::run(args, format, out),
        Command::Fmt(args) => cmd::fmt::run(args, format, out),
        Command::Project(args) => cmd::project::run(args, format, out),
        Command::Proxy(args) => cmd::proxy::run(args, format, out),
        Command::Gen(args) => cmd::r#gen::run(args, format, out),
        Command::Lint(args) => cmd::lint::run(args, format, out),
        Command::Runlog(args) => cmd::runlog::run_to(args, format, out),
        Command::Schema(args) => cmd::schema::run(args, format, out),
        Command::Serve(args) => cmd::serve::run(args, format, out),
        Command::Validate(args) => cmd::validate::run(args, format, out),
    }
}
