//! `agentwire fmt FILE [--check] [--newline]`: rewrite a JSON document in canonical text.

use std::io::Write;
use std::path::PathBuf;

use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// JSON document to rewrite in place (`-` reads standard input and writes standard output).
    file: PathBuf,
    /// Do not write; exit 1 when the file is not already in canonical text.
    #[arg(long)]
    check: bool,
    /// End the text with a line feed (the form the protocol digest is computed over).
    #[arg(long)]
    newline: bool,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let bytes = crate::input::read_document(&args.file)?;
    let value = agentwire_schema::parse_json(&bytes)
        .with_context(|| format!("cannot parse {}", args.file.display()))?;
    let text = agentwire_schema::canonical_text(&value, args.newline);
    let canonical = text.as_bytes() == bytes.as_slice();
    let name = args.file.display().to_string();
    if args.check {
        match format {
            Format::Human if canonical => writeln!(out, "{name}: canonical")?,
            Format::Human => writeln!(
                out,
                "{name}: not canonical (run `agentwire fmt{} {name}`)",
                if args.newline { " --newline" } else { "" }
            )?,
            Format::Json => writeln!(out, "{}", json!({"file": name, "canonical": canonical}))?,
        }
        return Ok(if canonical {
            output::EXIT_OK
        } else {
            output::EXIT_FOUND
        });
    }
    if args.file.as_os_str() == "-" {
        out.write_all(text.as_bytes())
            .context("cannot write standard output")?;
        return Ok(output::EXIT_OK);
    }
    if !canonical {
        std::fs::write(&args.file, text.as_bytes())
            .with_context(|| format!("cannot write {name}"))?;
    }
    match format {
        Format::Human => writeln!(
            out,
            "{name}: {}",
            if canonical { "unchanged" } else { "rewritten" }
        )?,
        Format::Json => writeln!(out, "{}", json!({"file": name, "changed": !canonical}))?,
    }
    Ok(output::EXIT_OK)
}
