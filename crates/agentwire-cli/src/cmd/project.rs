//! `agentwire project --schema S --to V [--from V] [--def NAME] [INPUT|-]`: projects NDJSON
//! messages of one wire version down to an older one. `--protocol roll-runtime` uses the
//! protocol's own projection rules (agentwire-roll) instead of the generic annotation engine.

use std::fs::File;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::PathBuf;

use agentwire_schema::{ProjectTarget, Projector, parse_json};
use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

/// Longest input line accepted; a longer one is reported and skipped.
pub(crate) const MAX_LINE_BYTES: usize = 16 * 1024 * 1024;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// The annotated schema document (docs/versions.md).
    #[arg(
        long,
        required_unless_present = "protocol",
        conflicts_with = "protocol"
    )]
    schema: Option<PathBuf>,
    /// Project messages of a built-in protocol (`roll-runtime`) with its own rules.
    #[arg(long, value_name = "NAME", conflicts_with = "definition")]
    protocol: Option<String>,
    /// The wire version to project to.
    #[arg(long)]
    to: String,
    /// The wire version of the input messages (default: the document's newest).
    #[arg(long)]
    from: Option<String>,
    /// Project instances of this definition instead of the document's root schema.
    #[arg(long = "def")]
    definition: Option<String>,
    /// NDJSON input, one message per line (`-` or nothing for standard input).
    #[arg(default_value = "-")]
    input: PathBuf,
}

/// What projects one message: the generic engine over an annotated document, or a built-in
/// protocol's own rules.
enum Engine {
    Generic(Box<Projector>),
    Roll {
        from: agentwire_roll::ProtocolVersion,
        to: agentwire_roll::ProtocolVersion,
    },
}

impl Engine {
    /// The projected message, or (code, pointer, message) of why it cannot be projected.
    fn project(
        &self,
        message: &serde_json::Value,
    ) -> Result<serde_json::Value, (String, String, String)> {
        match self {
            Engine::Generic(projector) => projector
                .project(message)
                .map_err(|e| (e.code().to_owned(), e.pointer.clone(), e.message.clone())),
            Engine::Roll { from, to } => {
                agentwire_roll::project::project_message(message, *from, *to)
                    .map_err(|e| (e.code().to_owned(), String::new(), e.to_string()))
            }
        }
    }
}

fn engine(args: &Args) -> anyhow::Result<Engine> {
    if let Some(name) = &args.protocol {
        let from = crate::protocols::Builtin::find(name, args.from.as_deref())?.version;
        let to = crate::protocols::Builtin::find(name, Some(&args.to))?.version;
        return Ok(Engine::Roll { from, to });
    }
    let Some(path) = &args.schema else {
        anyhow::bail!("--schema FILE or --protocol NAME is required")
    };
    let doc = output::load_schema(path)?;
    let from = match &args.from {
        Some(v) => v.clone(),
        None => doc
            .identity()?
            .version
            .map(|v| v.as_str().to_owned())
            .context("the schema declares no wire version; pass --from")?,
    };
    let target = match &args.definition {
        Some(name) => ProjectTarget::Definition(name),
        None => ProjectTarget::Root,
    };
    Ok(Engine::Generic(Box::new(Projector::new(
        &doc, &from, &args.to, target,
    )?)))
}

pub(crate) fn run(args: Args, format: Format) -> anyhow::Result<u8> {
    let projector = engine(&args)?;
    let reader: Box<dyn Read> = if args.input.as_os_str() == "-" {
        Box::new(std::io::stdin())
    } else {
        Box::new(
            File::open(&args.input)
                .with_context(|| format!("cannot read {}", args.input.display()))?,
        )
    };
    let mut reader = BufReader::new(reader);
    // Output is buffered, and flushed whenever the input has nothing more buffered: a file is
    // written in large blocks, and a live stream's projections leave before the next read waits.
    let mut out = std::io::BufWriter::new(std::io::stdout().lock());
    let mut failed = 0usize;
    let mut line_no = 0usize;
    let mut buf = Vec::new();
    loop {
        buf.clear();
        if reader.buffer().is_empty() {
            out.flush()?;
        }
        let read = (&mut reader)
            .take(MAX_LINE_BYTES as u64 + 1)
            .read_until(b'\n', &mut buf)
            .context("cannot read the input")?;
        if read == 0 {
            break;
        }
        line_no += 1;
        let too_long = buf.len() > MAX_LINE_BYTES && buf.last() != Some(&b'\n');
        if too_long {
            // Skip the rest of the oversized line.
            loop {
                let mut rest = Vec::new();
                let n = (&mut reader)
                    .take(MAX_LINE_BYTES as u64)
                    .read_until(b'\n', &mut rest)?;
                if n == 0 || rest.last() == Some(&b'\n') {
                    break;
                }
            }
            failed += 1;
            report(
                &mut out,
                format,
                line_no,
                "project.line-too-long",
                "",
                &format!("the line is longer than {MAX_LINE_BYTES} bytes"),
            )?;
            continue;
        }
        let line = trim_line(&buf);
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let message = match parse_json(line) {
            Ok(m) => m,
            Err(e) => {
                failed += 1;
                report(&mut out, format, line_no, e.kind.code(), "", &e.to_string())?;
                continue;
            }
        };
        match projector.project(&message) {
            Ok(projected) => writeln!(
                out,
                "{}",
                agentwire_schema::canonical::compact_text(&projected)
            )?,
            Err((code, pointer, message)) => {
                failed += 1;
                report(&mut out, format, line_no, &code, &pointer, &message)?;
            }
        }
    }
    out.flush()?;
    Ok(if failed == 0 {
        output::EXIT_OK
    } else {
        output::EXIT_FOUND
    })
}

fn trim_line(buf: &[u8]) -> &[u8] {
    let mut end = buf.len();
    while end > 0 && (buf[end - 1] == b'\n' || buf[end - 1] == b'\r') {
        end -= 1;
    }
    &buf[..end]
}

/// A message that cannot be projected: a JSON error line in its place on standard output for
/// programs, a line on standard error for people.
fn report(
    out: &mut impl Write,
    format: Format,
    line: usize,
    code: &str,
    pointer: &str,
    message: &str,
) -> anyhow::Result<()> {
    match format {
        Format::Json => writeln!(
            out,
            "{}",
            json!({"error": {"line": line, "code": code, "pointer": pointer, "message": message}})
        )?,
        Format::Human => {
            let at = if pointer.is_empty() {
                String::new()
            } else {
                format!(" at {pointer}")
            };
            eprintln!("line {line}: {code}{at}: {message}");
        }
    }
    Ok(())
}
