//! `agentwire digest FILE`: the protocol digest of a schema document.

use std::io::Write;
use std::path::PathBuf;

use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Schema document (`-` for standard input).
    file: PathBuf,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let doc = output::load_schema(&args.file)?;
    let digest = doc.digest();
    match format {
        Format::Human => writeln!(out, "{digest}")?,
        Format::Json => writeln!(
            out,
            "{}",
            json!({"file": args.file.display().to_string(), "digest": digest.as_str(), "draft": doc.draft().name()})
        )?,
    }
    Ok(output::EXIT_OK)
}
