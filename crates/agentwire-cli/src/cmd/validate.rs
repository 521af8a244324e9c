//! `agentwire validate --schema FILE [--def NAME] [--ndjson] [INPUT…|-]`: one report per message,
//! continuing past bad ones; NDJSON inputs are streamed line by line in bounded memory.

use std::io::{self, IsTerminal, Write};
use std::path::{Path, PathBuf};

use agentwire_runlog::terminal_safe;
use agentwire_schema::fast::Tape;
use agentwire_schema::{Issue, IssueCode, Validator};
use anyhow::Context;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

use crate::input::{self, Line, MAX_LINE_BYTES};
use crate::output::{self, Format};

/// Inputs at least this large show a progress bar when standard error is a terminal.
const PROGRESS_MIN_BYTES: u64 = 16 << 20;

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
    /// Wire version of the built-in protocol (default: its newest); only with `--protocol`.
    #[arg(
        long,
        value_name = "V",
        requires = "protocol",
        conflicts_with = "schema"
    )]
    version: Option<String>,
    /// Validate against this definition (`$defs/NAME` or `definitions/NAME`) instead of the root.
    #[arg(long, value_name = "NAME")]
    def: Option<String>,
    /// Each input holds one message per line (NDJSON); blank lines are skipped.
    #[arg(long)]
    ndjson: bool,
    /// Report only the summary (and inputs that cannot be read).
    #[arg(long, short, conflicts_with = "verbose")]
    quiet: bool,
    /// Report every message of a stream, valid ones too (by default a stream's human report
    /// lists only invalid messages).
    #[arg(long, short)]
    verbose: bool,
    /// Messages to validate: files, or `-` for standard input (the default).
    #[arg(value_name = "INPUT")]
    inputs: Vec<PathBuf>,
}

/// How much of the per-message report is written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Detail {
    /// The summary alone.
    Summary,
    /// Invalid messages of streams, and every whole document.
    Default,
    /// Every message.
    Every,
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let inputs = if args.inputs.is_empty() {
        vec![PathBuf::from("-")]
    } else {
        args.inputs.clone()
    };
    // The schema read from standard input leaves nothing there for the messages.
    let schema = args.schema.iter().filter(|_| args.protocol.is_none());
    input::stdin_at_most_once(inputs.iter().chain(schema))?;
    let validator = compile(&args)?;
    let detail = if args.quiet {
        Detail::Summary
    } else if args.verbose {
        Detail::Every
    } else {
        Detail::Default
    };
    let mut report = Report {
        out,
        format,
        detail,
        name_lines: inputs.len() > 1,
        counts: Counts::default(),
        valid_record: (String::new(), String::new()),
    };
    let mut tape = Tape::new();
    for input in &inputs {
        let name = input::display_name(input);
        report.start_input(&name);
        let result = if args.ndjson {
            validate_stream(&validator, input, &mut tape, &mut report)
        } else {
            validate_document(&validator, input, &name, &mut tape, &mut report)
        };
        if let Err(err) = result {
            // A report that cannot be written stops the command; an unreadable input does not.
            if err.downcast_ref::<WriteError>().is_some() {
                return Err(err);
            }
            report.input_error(&name, &err)?;
        }
    }
    report.summary()?;
    let counts = report.counts;
    // A message whose validity a limit left undecided is not an answer: the command could not
    // do what it was asked.
    Ok(if counts.errors > 0 || counts.undecided > 0 {
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
        (None, None) => {
            return Err(crate::cmd::Usage::new(
                "usage.no-schema",
                "--schema FILE or --protocol NAME is required",
            )
            .into());
        }
    };
    let validator = match &args.def {
        Some(name) => doc.validator_for(name),
        None => doc.validator(),
    };
    validator.with_context(|| format!("cannot compile schema {label}"))
}

/// A failure to write the report, kept apart from failures to read an input.
#[derive(Debug, thiserror::Error)]
#[error("cannot write standard output")]
struct WriteError(#[source] io::Error);

fn validate_document(
    validator: &Validator,
    input: &Path,
    name: &str,
    tape: &mut Tape,
    report: &mut Report<'_>,
) -> anyhow::Result<()> {
    let bytes = input::read_document(input)?;
    let issues = validator.validate_bytes_in(&bytes, tape);
    report.message(name, None, &issues).map_err(WriteError)?;
    Ok(())
}

fn validate_stream(
    validator: &Validator,
    input: &Path,
    tape: &mut Tape,
    report: &mut Report<'_>,
) -> anyhow::Result<()> {
    let (mut lines, len) = input::ndjson(input, MAX_LINE_BYTES)?;
    let progress = Progress::new(len);
    let name = input::display_name(input);
    while let Some(line) = lines.next_line()? {
        progress.advance(line.consumed);
        match line.line {
            Line::Text(bytes) => {
                let issues = validator.validate_bytes_in(bytes, tape);
                report.message(&name, Some(line.number), &issues)
            }
            Line::TooLong(length) => {
                report.message(&name, Some(line.number), &[line_too_long(length)])
            }
        }
        .map_err(WriteError)?;
    }
    progress.finish();
    Ok(())
}

fn line_too_long(length: u64) -> Issue {
    Issue {
        code: IssueCode::LineTooLong,
        instance_pointer: String::new(),
        schema_pointer: String::new(),
        keyword: "",
        message: input::line_too_long_message(length),
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
    /// Messages a limit stopped the check of before it could decide.
    undecided: u64,
    errors: u64,
}

/// What the issues of one message say about it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Verdict {
    Valid,
    Invalid,
    /// A limit stopped the check before it could decide (its one issue says which).
    Undecided,
}

impl Verdict {
    fn of(issues: &[Issue]) -> Verdict {
        match issues {
            [] => Verdict::Valid,
            [issue] if issue.code.is_undecided() => Verdict::Undecided,
            _ => Verdict::Invalid,
        }
    }

    fn word(self) -> &'static str {
        match self {
            Verdict::Valid => "valid",
            Verdict::Invalid => "invalid",
            Verdict::Undecided => "undecided",
        }
    }
}

/// Writes the per-message reports and the summary.
struct Report<'o> {
    out: &'o mut dyn Write,
    format: Format,
    detail: Detail,
    name_lines: bool,
    counts: Counts,
    /// The JSON record of a valid message of the current input, before and after its line
    /// number: most messages are valid, and their record needs no serializer.
    valid_record: (String, String),
}

impl Report<'_> {
    fn start_input(&mut self, input: &str) {
        let name = serde_json::Value::from(input).to_string();
        self.valid_record = (
            format!("{{\"input\":{name},\"line\":"),
            ",\"valid\":true,\"issues\":[]}\n".to_owned(),
        );
    }

    fn message(&mut self, input: &str, line: Option<u64>, issues: &[Issue]) -> io::Result<()> {
        let verdict = Verdict::of(issues);
        let valid = verdict == Verdict::Valid;
        self.counts.messages += 1;
        match verdict {
            Verdict::Valid => self.counts.valid += 1,
            Verdict::Invalid => self.counts.invalid += 1,
            Verdict::Undecided => self.counts.undecided += 1,
        }
        let shown = match self.detail {
            Detail::Summary => false,
            Detail::Every => true,
            // A stream's valid lines are what nobody needs to read; a document is one verdict.
            Detail::Default => !valid || line.is_none(),
        };
        if !shown {
            return Ok(());
        }
        match self.format {
            Format::Json => {
                if valid && let Some(n) = line {
                    let (before, after) = &self.valid_record;
                    return write!(self.out, "{before}{n}{after}");
                }
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
                let valid = match verdict {
                    Verdict::Undecided => serde_json::Value::Null,
                    _ => valid.into(),
                };
                let record =
                    json!({"input": input, "line": line, "valid": valid, "issues": issues});
                writeln!(self.out, "{record}")
            }
            Format::Human => {
                // Names and issues quote the input: control characters are escaped.
                let verdict = verdict.word();
                let input = terminal_safe(input);
                match line {
                    Some(n) if self.name_lines => {
                        writeln!(self.out, "{input} line {n}: {verdict}")?
                    }
                    Some(n) => writeln!(self.out, "line {n}: {verdict}")?,
                    None => writeln!(self.out, "{input}: {verdict}")?,
                }
                for issue in issues {
                    writeln!(self.out, "  {}", terminal_safe(&issue.to_string()))?;
                }
                Ok(())
            }
        }
    }

    fn input_error(&mut self, input: &str, err: &anyhow::Error) -> io::Result<()> {
        self.counts.errors += 1;
        match self.format {
            Format::Json => {
                let code = match err.downcast_ref::<input::InputError>() {
                    Some(e) => e.code(),
                    None if err.downcast_ref::<io::Error>().is_some() => "io",
                    None => "input",
                };
                let record = json!({"input": input, "error": {"code": code, "message": crate::output::message(err)}});
                writeln!(self.out, "{record}")
            }
            Format::Human => {
                self.out.flush()?;
                let _ = writeln!(io::stderr(), "error: {}", crate::output::message(err));
                Ok(())
            }
        }
    }

    fn summary(&mut self) -> io::Result<()> {
        let c = self.counts;
        match self.format {
            Format::Json => {
                let record = json!({"summary": {"messages": c.messages, "valid": c.valid, "invalid": c.invalid, "undecided": c.undecided, "errors": c.errors}});
                writeln!(self.out, "{record}")?;
            }
            Format::Human => {
                let undecided = if c.undecided > 0 {
                    format!(", {} undecided", c.undecided)
                } else {
                    String::new()
                };
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
                    "{} {noun}: {} valid, {} invalid{undecided}{errors}",
                    c.messages, c.valid, c.invalid
                )?;
            }
        }
        self.out.flush()
    }
}
