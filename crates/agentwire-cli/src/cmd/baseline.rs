//! `agentwire baseline freeze SCHEMA --out FILE`: writes the schema's canonical text as the frozen
//! compatibility baseline, refusing to replace a baseline unless the wire version was bumped.

use std::io::Write;
use std::path::PathBuf;

use agentwire_schema::SchemaDocument;
use agentwire_schema::compat::{self, FreezeDecision};
use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, clap::Subcommand)]
enum Command {
    /// Freeze SCHEMA into FILE (canonical text + "\n").
    Freeze(FreezeArgs),
}

#[derive(Debug, clap::Args)]
struct FreezeArgs {
    /// The schema document to freeze.
    schema: PathBuf,
    /// Where the baseline lives.
    #[arg(long)]
    out: PathBuf,
    /// Also replace a baseline of the same wire version when no change against it is breaking.
    #[arg(long)]
    additive: bool,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    match args.command {
        Command::Freeze(args) => freeze(args, format, out),
    }
}

fn freeze(args: FreezeArgs, format: Format, stdout: &mut dyn Write) -> anyhow::Result<u8> {
    let schema = output::load_schema(&args.schema)?;
    let existing =
        if args.out.exists() {
            let bytes = crate::input::read_document(&args.out)?;
            Some(SchemaDocument::from_slice(&bytes).with_context(|| {
                format!("cannot load the existing baseline {}", args.out.display())
            })?)
        } else {
            None
        };
    let decision = compat::freeze_decision(existing.as_ref(), &schema, args.additive)?;
    let out = args.out.display().to_string();
    if decision.allows_write() && decision != FreezeDecision::Unchanged {
        std::fs::write(&args.out, schema.canonical_text(true))
            .with_context(|| format!("cannot write {out}"))?;
    }
    match format {
        Format::Human => {
            let changes = decision
                .report()
                .filter(|report| !report.changes.is_empty())
                .map(super::compat::human_report)
                .unwrap_or_default();
            let line = format!("{out}: {}", decision.describe());
            if decision.allows_write() {
                write!(stdout, "{changes}")?;
                writeln!(stdout, "{line}")?;
            } else {
                // A refusal says why on standard error: the changes, then the reason.
                stdout.flush()?;
                let _ = writeln!(std::io::stderr(), "{changes}{line}");
            }
        }
        Format::Json => writeln!(
            stdout,
            "{}",
            json!({
                "out": out,
                "written": decision.allows_write() && decision != FreezeDecision::Unchanged,
                "decision": decision.code(),
                "message": decision.describe(),
                "digest": schema.digest().as_str(),
                "report": decision.report().map(|r| r.to_json()),
            })
        )?,
    }
    Ok(if decision.allows_write() {
        output::EXIT_OK
    } else {
        output::EXIT_FOUND
    })
}
