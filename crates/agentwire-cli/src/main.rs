//! The `agentwire` command: a thin layer over the library crates. Every command prints a report
//! for people by default and JSON with `--format json`.
//!
//! Exit codes: 0 success (everything valid, nothing to report); 1 the command ran and found
//! something (an invalid message, a lint error, a stale file, a breaking change); 2 usage, I/O or
//! schema errors that stopped the command.

mod cmd;
mod output;
mod protocols;

use std::process::ExitCode;

use clap::{Parser, Subcommand};

use crate::output::Format;

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
    /// Print the protocol digest (`sha256:` of canonical text + "\n") of a schema document.
    Digest(cmd::digest::Args),
    /// The durable event log: `events inspect|tail|trim --store sqlite:PATH|postgres://…`.
    #[command(subcommand_required = true)]
    Events(cmd::events::Args),
    /// Rewrite a JSON document in canonical text (JSON.stringify(value, null, 2)).
    Fmt(cmd::fmt::Args),
    /// Project NDJSON messages of one wire version down to an older one (docs/versions.md).
    Project(cmd::project::Args),
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
    let result = match cli.command {
        Command::Baseline(args) => cmd::baseline::run(args, cli.format),
        Command::Compat(args) => cmd::compat::run(args, cli.format),
        Command::Digest(args) => cmd::digest::run(args, cli.format),
        Command::Events(args) => cmd::events::run(args, cli.format),
        Command::Fmt(args) => cmd::fmt::run(args, cli.format),
        Command::Project(args) => cmd::project::run(args, cli.format),
        Command::Gen(args) => cmd::r#gen::run(args, cli.format),
        Command::Lint(args) => cmd::lint::run(args, cli.format),
        Command::Runlog(args) => cmd::runlog::run(args, cli.format),
        Command::Schema(args) => cmd::schema::run(args, cli.format),
        Command::Validate(args) => cmd::validate::run(args, cli.format),
    };
    match result {
        Ok(code) => ExitCode::from(code),
        Err(err) => {
            output::print_fatal(&err, cli.format);
            ExitCode::from(output::EXIT_ERROR)
        }
    }
}
