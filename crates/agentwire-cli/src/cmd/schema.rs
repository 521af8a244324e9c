//! `agentwire schema …`: operations on a schema document as a whole. `schema export` converts a
//! document to draft-07 or 2020-12 and writes it in canonical text.

use std::io::Write;
use std::path::PathBuf;

use agentwire_schema::{Draft, SchemaDocument, canonical_text};
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
    /// Convert a schema document to draft-07 or 2020-12 (refs rewritten, checked against the
    /// draft's metaschema) and write it in canonical text.
    // Leaves `--version` free to name a protocol version.
    #[command(disable_version_flag = true)]
    Export(ExportArgs),
}

#[derive(Debug, clap::Args)]
pub(crate) struct ExportArgs {
    /// Target draft: `07` or `2020-12` (default: the document's own draft).
    #[arg(long, value_parser = parse_draft)]
    draft: Option<Draft>,
    /// Export the strict schema of exactly this wire version of an annotated document
    /// (docs/versions.md) instead of the document as a whole.
    #[arg(long)]
    version: Option<String>,
    /// Write the exported document to this file instead of standard output.
    #[arg(long)]
    out: Option<PathBuf>,
    /// Export a built-in protocol (`roll-runtime`) instead of a file; `--version` picks the wire
    /// version (default: the newest).
    #[arg(long, value_name = "NAME", conflicts_with = "file")]
    protocol: Option<String>,
    /// Schema document (`-` for standard input).
    #[arg(required_unless_present = "protocol")]
    file: Option<PathBuf>,
}

fn parse_draft(text: &str) -> Result<Draft, String> {
    Draft::from_name(text).ok_or_else(|| format!("unknown draft {text:?}; expected 07 or 2020-12"))
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    match args.command {
        Command::Export(args) => export(args, format, out),
    }
}

/// The document the export starts from, and how reports name it.
fn source(args: &ExportArgs) -> anyhow::Result<(SchemaDocument, String)> {
    if let Some(protocol) = &args.protocol {
        let builtin = crate::protocols::Builtin::find(protocol, args.version.as_deref())?;
        return Ok((builtin.document()?, builtin.label()));
    }
    let Some(file) = &args.file else {
        return Err(crate::cmd::Usage::new(
            "usage.no-schema",
            "a schema FILE or --protocol NAME is required",
        )
        .into());
    };
    let name = file.display().to_string();
    let doc = output::load_schema(file)?;
    let Some(version) = &args.version else {
        return Ok((doc, name));
    };
    let view = agentwire_schema::export_version(&doc, version)
        .with_context(|| format!("cannot export version {version} of {name}"))?;
    Ok((SchemaDocument::from_value(view)?, name))
}

fn export(args: ExportArgs, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let (doc, name) = source(&args)?;
    let draft = args.draft.unwrap_or(doc.draft());
    let value = match agentwire_schema::export(&doc, draft) {
        Ok(value) => value,
        Err(err) => {
            // Printed here rather than as a generic fatal error, to keep its code and pointer.
            match format {
                Format::Human => {
                    let _ = writeln!(
                        std::io::stderr(),
                        "error: cannot export {name} to {draft}: {err}"
                    );
                }
                Format::Json => writeln!(
                    out,
                    "{}",
                    json!({"error": {"code": err.code(), "pointer": err.pointer, "message": err.message}})
                )?,
            }
            return Ok(output::EXIT_ERROR);
        }
    };
    let text = canonical_text(&value, true);
    let Some(file) = &args.out else {
        out.write_all(text.as_bytes())
            .context("cannot write standard output")?;
        return Ok(output::EXIT_OK);
    };
    std::fs::write(file, text.as_bytes())
        .with_context(|| format!("cannot write {}", file.display()))?;
    let digest = agentwire_schema::digest(&value);
    match format {
        Format::Human => writeln!(
            out,
            "{name} -> {} (draft {draft}, {digest})",
            file.display()
        )?,
        Format::Json => writeln!(
            out,
            "{}",
            json!({"file": name, "out": file.display().to_string(), "draft": draft.name(), "digest": digest.as_str()})
        )?,
    }
    Ok(output::EXIT_OK)
}
