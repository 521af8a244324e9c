//! Output conventions shared by every command: formats, exit codes, fatal errors, reading inputs.

use std::io::{Read, Write};
use std::path::Path;

use anyhow::Context;
use serde_json::json;

/// Exit code: the command ran and found nothing wrong.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: the command ran and found something (invalid input, stale file, breaking change).
pub(crate) const EXIT_FOUND: u8 = 1;
/// Exit code: usage, I/O or schema error.
pub(crate) const EXIT_ERROR: u8 = 2;

/// Who reads the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Text for people.
    Human,
    /// One JSON document (or NDJSON for streams) for programs.
    Json,
}

/// Prints an error that stopped the command: on stderr for people, as
/// `{"error": {"code", "message"}}` on stdout for programs.
pub(crate) fn print_fatal(err: &anyhow::Error, format: Format) {
    let code = error_code(err);
    match format {
        Format::Human => eprintln!("error: {err:#}"),
        Format::Json => {
            // Standard output may be the closed pipe that caused the error.
            let _ = writeln!(
                std::io::stdout(),
                "{}",
                json!({"error": {"code": code, "message": format!("{err:#}")}})
            );
        }
    }
}

fn error_code(err: &anyhow::Error) -> &'static str {
    // Every library error carries a stable code; the first one in the chain names the failure.
    macro_rules! coded {
        ($cause:expr, $($ty:ty),+ $(,)?) => {
            $(if let Some(e) = $cause.downcast_ref::<$ty>() {
                return e.code();
            })+
        };
    }
    for cause in err.chain() {
        coded!(
            cause,
            agentwire_schema::SchemaError,
            agentwire_schema::IdentityError,
            agentwire_schema::ExportError,
            agentwire_schema::VersionError,
            agentwire_schema::ProjectError,
            agentwire_codegen::CodegenError,
            agentwire_events::Error,
        );
        if let Some(e) = cause.downcast_ref::<agentwire_schema::JsonError>() {
            return e.kind.code();
        }
        if cause.downcast_ref::<std::io::Error>().is_some() {
            return "io";
        }
    }
    "error"
}

/// Reads a whole input: a file path, or standard input for `-`.
pub(crate) fn read_input(path: &Path) -> anyhow::Result<Vec<u8>> {
    if path.as_os_str() == "-" {
        let mut bytes = Vec::new();
        std::io::stdin()
            .read_to_end(&mut bytes)
            .context("cannot read standard input")?;
        Ok(bytes)
    } else {
        std::fs::read(path).with_context(|| format!("cannot read {}", path.display()))
    }
}

/// Loads a schema document from a path (or `-`).
pub(crate) fn load_schema(path: &Path) -> anyhow::Result<agentwire_schema::SchemaDocument> {
    let bytes = read_input(path)?;
    agentwire_schema::SchemaDocument::from_slice(&bytes)
        .with_context(|| format!("cannot load schema {}", path.display()))
}
