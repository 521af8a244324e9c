//! `agentwire lint FILE`: findings about a schema document, each with a stable `AWnnn` code
//! (docs/lint.md). The document does not have to load: every unresolved reference is reported.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;

use agentwire_runlog::terminal_safe;
use agentwire_schema::lint::{DefinitionRoots, LintOptions, lint_value_with};
use agentwire_schema::{LintSummary, parse_json};
use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Schema document (`-` for standard input).
    file: PathBuf,
    /// How definitions no reference reaches are reported: `auto` (one AW051 when most are
    /// unreferenced, else one AW050 each), `rooted` (always one AW050 each) or `registry` (none).
    #[arg(long, value_enum, default_value_t = Definitions::Auto)]
    definitions: Definitions,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Definitions {
    Auto,
    Rooted,
    Registry,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let name = args.file.display().to_string();
    let bytes = crate::input::read_document(&args.file)?;
    let value = parse_json(&bytes).with_context(|| format!("cannot parse {name}"))?;
    let definitions = match args.definitions {
        Definitions::Auto => DefinitionRoots::Auto,
        Definitions::Rooted => DefinitionRoots::Rooted,
        Definitions::Registry => DefinitionRoots::Registry,
    };
    let options = LintOptions {
        definitions,
        ..LintOptions::default()
    };
    let findings = lint_value_with(&value, options);
    let summary = LintSummary::of(&findings);
    let mut text = String::new();
    match format {
        Format::Human => {
            // Findings and the name quote the document: control characters are escaped.
            for finding in &findings {
                let _ = writeln!(text, "{}", terminal_safe(&finding.to_string()));
            }
            let _ = writeln!(
                text,
                "{}: {} {}, {} {}, {} {}",
                terminal_safe(&name),
                summary.errors,
                plural(summary.errors, "error", "errors"),
                summary.warnings,
                plural(summary.warnings, "warning", "warnings"),
                summary.infos,
                plural(summary.infos, "info", "infos"),
            );
        }
        Format::Json => {
            let report = json!({"file": name, "findings": findings, "summary": summary});
            let _ = writeln!(text, "{report}");
        }
    }
    out.write_all(text.as_bytes())
        .context("cannot write standard output")?;
    Ok(if summary.errors > 0 {
        output::EXIT_FOUND
    } else {
        output::EXIT_OK
    })
}

fn plural(n: usize, one: &'static str, many: &'static str) -> &'static str {
    if n == 1 { one } else { many }
}
