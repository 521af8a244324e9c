//! `agentwire compat OLD NEW`: the changes between two schema documents, each breaking or
//! additive; exit 1 when any is breaking.

use std::io::Write;
use std::path::PathBuf;

use agentwire_runlog::terminal_safe;

use agentwire_schema::compat::{self, ChangeClass, CompatOptions, CompatReport, Direction};
use serde_json::Value;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The old schema document (e.g. the frozen baseline).
    old: PathBuf,
    /// The new schema document.
    new: PathBuf,
    /// Direction of nodes no `x-agentwire-direction` reaches (default: `both` for documents with
    /// an `x-agentwire` block, `unspecified` otherwise).
    #[arg(long, value_parser = parse_direction)]
    direction_default: Option<Direction>,
    /// Compare only these definitions (comma-separated names) and the definitions they reach
    /// through `$ref`, not the root nor any other definition: how a document of a peer's
    /// protocol is held to the definitions it shares with the peer's schema.
    #[arg(long, value_delimiter = ',', value_name = "NAMES")]
    definitions: Option<Vec<String>>,
}

pub(crate) fn parse_direction(text: &str) -> Result<Direction, String> {
    Direction::parse(text).ok_or_else(|| {
        format!("unknown direction {text:?}; expected host-to-runtime, runtime-to-host, both or unspecified")
    })
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    // Two `-` would read standard input twice: the second document would always be empty.
    crate::input::stdin_at_most_once([&args.old, &args.new])?;
    let old = output::load_schema(&args.old)?;
    let new = output::load_schema(&args.new)?;
    if let Some(names) = &args.definitions {
        for name in names {
            if !has_definition(old.value(), name) && !has_definition(new.value(), name) {
                return Err(crate::cmd::Usage::new(
                    "usage.unknown-definition",
                    format!("no definition {name:?} in either document"),
                )
                .into());
            }
        }
    }
    let report = compat::compat_with(
        &old,
        &new,
        &CompatOptions {
            default_direction: args.direction_default,
            definitions: args.definitions,
        },
    );
    match format {
        Format::Human => write!(out, "{}", human_report(&report))?,
        Format::Json => writeln!(out, "{}", report.to_json())?,
    }
    Ok(if report.is_compatible() {
        output::EXIT_OK
    } else {
        output::EXIT_FOUND
    })
}

fn has_definition(document: &Value, name: &str) -> bool {
    ["$defs", "definitions"]
        .iter()
        .any(|key| document.get(key).and_then(|defs| defs.get(name)).is_some())
}

/// One line per change, then a summary line.
pub(crate) fn human_report(report: &CompatReport) -> String {
    let mut out = String::new();
    for change in &report.changes {
        let class = match change.class {
            ChangeClass::Breaking => "breaking",
            ChangeClass::Additive => "additive",
        };
        let version = change
            .version
            .as_deref()
            .map(|v| format!(" (version {v})"))
            .unwrap_or_default();
        let mut detail = String::new();
        if let Some(old) = &change.old {
            detail.push_str(&format!(" old {}", short(old)));
        }
        if let Some(new) = &change.new {
            detail.push_str(&format!(" new {}", short(new)));
        }
        // Pointers and values quote the documents: control characters are escaped.
        let line = format!(
            "{class:<8} {:<28} {} [{}]{version}{detail}",
            change.rule.id(),
            if change.pointer.is_empty() {
                "(root)"
            } else {
                &change.pointer
            },
            change.direction.id(),
        );
        out.push_str(&terminal_safe(&line));
        out.push('\n');
    }
    let breaking = report.breaking().count();
    out.push_str(&format!(
        "{} change{}: {breaking} breaking, {} additive\n",
        report.changes.len(),
        if report.changes.len() == 1 { "" } else { "s" },
        report.changes.len() - breaking
    ));
    out
}

/// Most characters of a value shown on a human line.
const MAX_SHOWN_VALUE: usize = 60;

fn short(value: &Value) -> String {
    let text = value.to_string();
    if text.chars().count() <= MAX_SHOWN_VALUE {
        text
    } else {
        let cut: String = text.chars().take(MAX_SHOWN_VALUE).collect();
        format!("{cut}…")
    }
}
