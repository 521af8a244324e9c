//! `agentwire validate --schema FILE [--def NAME] [--ndjson] [INPUT…|-]`: one report per message,
//! continuing past bad ones; NDJSON inputs are streamed line by line in bounded memory.

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, IsTerminal, Read, Write};
use std::path::{Path, PathBuf};

use agentwire_schema::{Issue, IssueCode, Validator};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::output::{self, Format};

/// Longest NDJSON line read. A longer line is reported as one `input.line-too-long` issue and
/// skipped without being held in memory.
pub(crate) const MAX_LINE_BYTES: usize = 16 << 20;

/// Largest input read as one document (without `--ndjson`).
pub(crate) const MAX_DOCUMENT_BYTES: u64 = 256 << 20;

/// Inputs at least this large show a progress bar when standard error is a terminal.
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

/// Size of the reads from an input.
const READ_BUFFER_BYTES: usize = 256 << 10;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Schema document to validate against.
    #[arg(
        long,
        value_name = "FILE",
        required_unless_present = "protocol",
        conflicts_with = "protocol"
    )]
    schema: Option<PathBuf>,
    /// Validate against a built-in protocol instead of a schema file (`roll-runtime`).
    #[arg(long, value_name = "NAME")]
    protocol: Option<String>,
    /// Wire version of the built-in protocol (default: its newest).
    #[arg(long, value_name = "V", requires = "protocol")]
    version: Option<String>,
    /// Validate against this definition (`$defs/NAME` or `definitions/NAME`) instead of the root.
    #[arg(long, value_name = "NAME")]
    def: Option<String>,
    /// Each input holds one message per line (NDJSON); blank lines are skipped.
    #[arg(long)]
    ndjson: bool,
    /// Report only invalid messages and the summary.
    #[arg(long, short)]
    quiet: bool,
    /// Messages to validate: files, or `-` for standard input (the default).
    #[arg(value_name = "INPUT")]
    inputs: Vec<PathBuf>,
}

pub(crate) fn run(args: Args, format: Format) -> anyhow::Result<u8> {
    let validator = compile(&args)?;
    let inputs = if args.inputs.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.inputs.clone()
    };
    let stdout = io::stdout();
    let mut report = Report {
        out: BufWriter::new(stdout.lock()),
        format,
        quiet: args.quiet,
        name_lines: inputs.len() > 1,
        counts: Counts::default(),
    };
    for input in &inputs {
        let name = display_name(input);
        let result = if args.ndjson {
            validate_stream(&validator, input, &name, &mut report)
        } else {
            validate_document(&validator, input, &name, &mut report)
        };
        if let Err(err) = result {
            if err
                .downcast_ref::<io::Error>()
                .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
            {
                return Ok(output::EXIT_ERROR);
            }
            report.input_error(&name, &err)?;
        }
    }
    report.summary()?;
    let counts = report.counts;
    Ok(if counts.errors > 0 {
        output::EXIT_ERROR
    } else if counts.invalid > 0 {
        output::EXIT_FOUND
    } else {
        output::EXIT_OK
    })
}

/// Loads the schema and compiles the validator the arguments ask for.
fn compile(args: &Args) -> anyhow::Result<Validator> {
    let (doc, label) = match (&args.schema, &args.protocol) {
        (_, Some(name)) => {
            let builtin = crate::protocols::Builtin::find(name, args.version.as_deref())?;
            (builtin.document()?, builtin.label())
        }
        (Some(path), None) => (output::load_schema(path)?, path.display().to_string()),
        (None, None) => anyhow::bail!("--schema FILE or --protocol NAME is required"),
    };
    let validator = match &args.def {
        Some(name) => doc.validator_for(name),
        None => doc.validator(),
    };
    validator.with_context(|| format!("cannot compile schema {label}"))
}

fn display_name(input: &Path) -> String {
    if input.as_os_str() == "-" {
        "<stdin>".to_owned()
    } else {
        input.display().to_string()
    }
}

fn open(input: &Path) -> anyhow::Result<(Box<dyn Read>, Option<u64>)> {
    if input.as_os_str() == "-" {
        return Ok((Box::new(io::stdin().lock()), None));
    }
    let file = File::open(input).with_context(|| format!("cannot read {}", input.display()))?;
    let len = file
        .metadata()
        .ok()
        .filter(|m| m.is_file())
        .map(|m| m.len());
    Ok((Box::new(file), len))
}

fn validate_document(
    validator: &Validator,
    input: &Path,
    name: &str,
    report: &mut Report<'_>,
) -> anyhow::Result<()> {
    let (reader, _) = open(input)?;
    let mut bytes = Vec::new();
    reader
        .take(MAX_DOCUMENT_BYTES + 1)
        .read_to_end(&mut bytes)
        .with_context(|| format!("cannot read {}", input.display()))?;
    if bytes.len() as u64 > MAX_DOCUMENT_BYTES {
        anyhow::bail!(
            "{} is larger than {} MiB; use --ndjson for a stream of messages",
            input.display(),
            MAX_DOCUMENT_BYTES >> 20
        );
    }
    let issues = validator.validate_bytes(&bytes);
    report.message(name, None, &issues)?;
    Ok(())
}

fn validate_stream(
    validator: &Validator,
    input: &Path,
    name: &str,
    report: &mut Report<'_>,
) -> anyhow::Result<()> {
    let (reader, len) = open(input)?;
    let progress = Progress::new(len);
    let reader = BufReader::with_capacity(READ_BUFFER_BYTES, reader);
    for_each_line(reader, MAX_LINE_BYTES, |number, line, consumed| {
        progress.advance(consumed);
        let issues = match line {
            Line::Text(bytes) => validator.validate_bytes(bytes),
            Line::TooLong(length) => vec![line_too_long(length)],
        };
        report.message(name, Some(number), &issues)
    })
    .with_context(|| format!("cannot read {}", input.display()))?;
    progress.finish();
    Ok(())
}

fn line_too_long(length: u64) -> Issue {
    Issue {
        code: IssueCode::LineTooLong,
        instance_pointer: String::new(),
        schema_pointer: String::new(),
        keyword: "",
        message: format!(
            "line of {length} bytes is longer than the limit of {MAX_LINE_BYTES} bytes; skipped"
        ),
    }
}

/// One NDJSON line as handed to the caller.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Line<'a> {
    /// The line's bytes, without the line feed and a carriage return before it.
    Text(&'a [u8]),
    /// The line was longer than the limit; only its length in bytes was kept.
    TooLong(u64),
}

/// Calls `visit(line_number, line, bytes_consumed)` for every non-blank line. Holds at most
/// `max_line` bytes of one line in memory; a longer line is drained and reported as
/// [`Line::TooLong`].
pub(crate) fn for_each_line<R: BufRead>(
    mut reader: R,
    max_line: usize,
    mut visit: impl FnMut(u64, Line<'_>, u64) -> io::Result<()>,
) -> io::Result<()> {
    let mut line: Vec<u8> = Vec::new();
    let mut length: u64 = 0;
    let mut too_long = false;
    let mut number: u64 = 0;
    let mut emit = |line: &mut Vec<u8>,
                    length: &mut u64,
                    too_long: &mut bool,
                    number: &mut u64,
                    ended: bool| {
        *number += 1;
        let consumed = *length + u64::from(ended);
        let result = if *too_long {
            visit(*number, Line::TooLong(*length), consumed)
        } else {
            let text = line.strip_suffix(b"\r").unwrap_or(line);
            if text.iter().all(u8::is_ascii_whitespace) {
                Ok(())
            } else {
                visit(*number, Line::Text(text), consumed)
            }
        };
        line.clear();
        *length = 0;
        *too_long = false;
        result
    };
    loop {
        let chunk = match reader.fill_buf() {
            Ok(chunk) => chunk,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
            Err(e) => return Err(e),
        };
        if chunk.is_empty() {
            if length > 0 || too_long {
                emit(&mut line, &mut length, &mut too_long, &mut number, false)?;
            }
            return Ok(());
        }
        let (piece, ends_line) = match chunk.iter().position(|&b| b == b'\n') {
            Some(i) => (&chunk[..i], true),
            None => (chunk, false),
        };
        length += piece.len() as u64;
        if !too_long {
            if line.len() + piece.len() > max_line {
                too_long = true;
                line = Vec::new();
            } else {
                line.extend_from_slice(piece);
            }
        }
        let used = piece.len() + usize::from(ends_line);
        reader.consume(used);
        if ends_line {
            emit(&mut line, &mut length, &mut too_long, &mut number, true)?;
        }
    }
}

/// A progress bar on standard error for large inputs, only when it is a terminal.
struct Progress(Option<ProgressBar>);

impl Progress {
    fn new(len: Option<u64>) -> Progress {
        if !io::stderr().is_terminal() {
            return Progress(None);
        }
        let bar = match len {
            Some(len) if len >= PROGRESS_MIN_BYTES => {
                let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
                if let Ok(style) = ProgressStyle::with_template(
                    "{bar:40} {bytes}/{total_bytes} {bytes_per_sec} eta {eta}",
                ) {
                    bar.set_style(style);
                }
                bar
            }
            Some(_) => return Progress(None),
            // Unknown size: count bytes, shown once the stream turns out to be large.
            None => {
                let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::hidden());
                if let Ok(style) =
                    ProgressStyle::with_template("{spinner} {bytes} read {bytes_per_sec}")
                {
                    bar.set_style(style);
                }
                bar
            }
        };
        Progress(Some(bar))
    }

    fn advance(&self, bytes: u64) {
        if let Some(bar) = &self.0 {
            bar.inc(bytes);
            if bar.is_hidden() && bar.position() >= PROGRESS_MIN_BYTES {
                bar.set_draw_target(ProgressDrawTarget::stderr());
            }
        }
    }

    fn finish(&self) {
        if let Some(bar) = &self.0 {
            bar.finish_and_clear();
        }
    }
}

#[derive(Debug, Default, Clone, Copy)]
struct Counts {
    messages: u64,
    valid: u64,
    invalid: u64,
    errors: u64,
}

/// Writes the per-message reports and the summary.
struct Report<'o> {
    out: BufWriter<io::StdoutLock<'o>>,
    format: Format,
    quiet: bool,
    name_lines: bool,
    counts: Counts,
}

impl Report<'_> {
    fn message(&mut self, input: &str, line: Option<u64>, issues: &[Issue]) -> io::Result<()> {
        let valid = issues.is_empty();
        self.counts.messages += 1;
        if valid {
            self.counts.valid += 1;
        } else {
            self.counts.invalid += 1;
        }
        if valid && self.quiet {
            return Ok(());
        }
        match self.format {
            Format::Json => {
                let issues: Vec<_> = issues
                    .iter()
                    .map(|i| {
                        json!({
                            "instancePath": i.instance_pointer,
                            "schemaPath": i.schema_pointer,
                            "keyword": i.keyword,
                            "code": i.code.code(),
                            "message": i.message,
                        })
                    })
                    .collect();
                let record =
                    json!({"input": input, "line": line, "valid": valid, "issues": issues});
                writeln!(self.out, "{record}")
            }
            Format::Human => {
                let verdict = if valid { "valid" } else { "invalid" };
                match line {
                    Some(n) if self.name_lines => {
                        writeln!(self.out, "{input} line {n}: {verdict}")?
                    }
                    Some(n) => writeln!(self.out, "line {n}: {verdict}")?,
                    None => writeln!(self.out, "{input}: {verdict}")?,
                }
                for issue in issues {
                    writeln!(self.out, "  {issue}")?;
                }
                Ok(())
            }
        }
    }

    fn input_error(&mut self, input: &str, err: &anyhow::Error) -> io::Result<()> {
        self.counts.errors += 1;
        match self.format {
            Format::Json => {
                let code = if err.downcast_ref::<io::Error>().is_some() {
                    "io"
                } else {
                    "input"
                };
                let record =
                    json!({"input": input, "error": {"code": code, "message": format!("{err:#}")}});
                writeln!(self.out, "{record}")
            }
            Format::Human => {
                self.out.flush()?;
                eprintln!("error: {err:#}");
                Ok(())
            }
        }
    }

    fn summary(&mut self) -> io::Result<()> {
        let c = self.counts;
        match self.format {
            Format::Json => {
                let record = json!({"summary": {"messages": c.messages, "valid": c.valid, "invalid": c.invalid, "errors": c.errors}});
                writeln!(self.out, "{record}")?;
            }
            Format::Human => {
                let errors = if c.errors > 0 {
                    format!(", {} unreadable inputs", c.errors)
                } else {
                    String::new()
                };
                let noun = if c.messages == 1 {
                    "message"
                } else {
                    "messages"
                };
                writeln!(
                    self.out,
                    "{} {noun}: {} valid, {} invalid{errors}",
                    c.messages, c.valid, c.invalid
                )?;
            }
        }
        self.out.flush()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(input: &[u8], max: usize) -> Vec<(u64, String, u64)> {
        let mut seen = Vec::new();
        // A tiny buffer makes lines span several reads.
        let reader = BufReader::with_capacity(3, input);
        for_each_line(reader, max, |n, line, consumed| {
            let text = match line {
                Line::Text(t) => String::from_utf8_lossy(t).into_owned(),
                Line::TooLong(len) => format!("<too long: {len}>"),
            };
            seen.push((n, text, consumed));
            Ok(())
        })
        .unwrap();
        seen
    }

    #[test]
    fn splits_lines_and_skips_blank_ones() {
        assert_eq!(
            lines(b"{\"a\":1}\r\n\n  \n[2]\nlast", 100),
            vec![
                (1, "{\"a\":1}".to_owned(), 9),
                (4, "[2]".to_owned(), 4),
                (5, "last".to_owned(), 4)
            ]
        );
    }

    #[test]
    fn over_long_lines_are_reported_not_buffered() {
        assert_eq!(
            lines(b"12345\n123456789\n1\n", 5),
            vec![
                (1, "12345".to_owned(), 6),
                (2, "<too long: 9>".to_owned(), 10),
                (3, "1".to_owned(), 2)
            ]
        );
        assert_eq!(
            lines(b"123456789", 5),
            vec![(1, "<too long: 9>".to_owned(), 9)]
        );
    }
}
