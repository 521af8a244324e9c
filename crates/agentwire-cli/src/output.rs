//! Output conventions shared by every command: formats, exit codes, the standard output handle,
//! fatal errors, loading schemas.

use std::io::{self, Write};
use std::path::Path;

use anyhow::Context;
use serde_json::json;

use crate::input;

/// Exit code: the command ran and found nothing wrong.
pub(crate) const EXIT_OK: u8 = 0;
/// Exit code: the command ran and found something (invalid input, stale file, breaking change).
pub(crate) const EXIT_FOUND: u8 = 1;
/// Exit code: usage, I/O or schema error.
pub(crate) const EXIT_ERROR: u8 = 2;
/// Exit code: standard output was closed by its reader (`| head`) before the output was
/// complete. 128 + SIGPIPE, what a shell reports for a tool the signal ended, so that pipelines
/// with `set -o pipefail` read every tool's early end alike.
pub(crate) const EXIT_BROKEN_PIPE: u8 = 141;

/// Who reads the output.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Format {
    /// Text for people.
    Human,
    /// One JSON document (or NDJSON for streams) for programs.
    Json,
}

/// Size of the standard output buffer.
const STDOUT_BUFFER_BYTES: usize = 64 << 10;

/// Standard output as commands write it: buffered, and failing when the descriptor is not open.
///
/// The standard library's `Stdout` reports success for writes to a descriptor that is not open
/// (EBADF), which would turn lost output into an exit 0; writing through a duplicate of the
/// descriptor makes such a write fail instead. `/dev/null` is an ordinary destination whatever
/// its open mode: a caller that discards the output still gets the command's exit code. (A
/// descriptor closed when the process starts, `>&-`, is replaced by the runtime with `/dev/null`
/// opened read-write before `main`, on Linux; nothing tells it apart from a caller's
/// `/dev/null`, so it is treated as one.)
pub(crate) fn stdout() -> io::BufWriter<Box<dyn Write>> {
    io::BufWriter::with_capacity(STDOUT_BUFFER_BYTES, raw_stdout())
}

#[cfg(unix)]
fn raw_stdout() -> Box<dyn Write> {
    use std::os::fd::AsFd;
    match io::stdout().as_fd().try_clone_to_owned() {
        Ok(fd) => Box::new(std::fs::File::from(fd)),
        Err(err) => Box::new(ClosedStdout(err.kind())),
    }
}

#[cfg(not(unix))]
fn raw_stdout() -> Box<dyn Write> {
    Box::new(io::stdout())
}

/// Standard output whose descriptor is not open: every write fails.
#[cfg(unix)]
#[derive(Debug)]
struct ClosedStdout(io::ErrorKind);

#[cfg(unix)]
impl Write for ClosedStdout {
    fn write(&mut self, _: &[u8]) -> io::Result<usize> {
        Err(io::Error::new(self.0, "standard output is closed"))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Whether the error, or anything that caused it, is a write to a reader that went away.
pub(crate) fn is_broken_pipe(err: &anyhow::Error) -> bool {
    err.chain().any(|cause| {
        cause
            .downcast_ref::<io::Error>()
            .is_some_and(|e| e.kind() == io::ErrorKind::BrokenPipe)
    })
}

/// Prints an error that stopped the command: on stderr for people, as
/// `{"error": {"code", "message"}}` on `out` for programs (standard output, or standard error
/// for a command that speaks a protocol on standard output).
pub(crate) fn print_fatal(err: &anyhow::Error, format: Format, out: &mut dyn Write) {
    let code = error_code(err);
    let printed = match format {
        Format::Human => Err(()),
        Format::Json => writeln!(
            out,
            "{}",
            json!({"error": {"code": code, "message": message(err)}})
        )
        .and_then(|()| out.flush())
        .map_err(|_| ()),
    };
    // For people, and for programs whose standard output is unusable, standard error says it.
    if printed.is_err() {
        // The message may quote the input (a file name, a value): one line, control
        // characters escaped.
        let _ = writeln!(
            io::stderr(),
            "error: {}",
            agentwire_runlog::terminal_safe(&message(err))
        );
    }
}

/// What an error says, with its causes: each cause after a colon, unless the message so far
/// already ends with it (an error whose text quotes its source, such as `i/o: {source}`, is
/// followed by that source in the chain).
pub(crate) fn message(err: &anyhow::Error) -> String {
    let mut text = String::new();
    for cause in err.chain() {
        let said = cause.to_string();
        if text.is_empty() {
            text = said;
        } else if !text.ends_with(&said) {
            text.push_str(": ");
            text.push_str(&said);
        }
    }
    text
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
            input::InputError,
            crate::cmd::Usage,
            agentwire_schema::SchemaError,
            agentwire_schema::IdentityError,
            agentwire_schema::ExportError,
            agentwire_schema::VersionError,
            agentwire_schema::ProjectError,
            agentwire_codegen::CodegenError,
            agentwire_events::Error,
            agentwire_client::proxy::ProxyError,
            agentwire_client::conformance::ConformanceError,
            agentwire_client::conformance::ScriptError,
        );
        if let Some(e) = cause.downcast_ref::<agentwire_schema::JsonError>() {
            return e.kind.code();
        }
        if cause.downcast_ref::<io::Error>().is_some() {
            return "io";
        }
    }
    "error"
}

/// Loads a schema document from a path (or `-`).
pub(crate) fn load_schema(path: &Path) -> anyhow::Result<agentwire_schema::SchemaDocument> {
    let bytes = input::read_document(path)?;
    agentwire_schema::SchemaDocument::from_slice(&bytes)
        .with_context(|| format!("cannot load schema {}", path.display()))
}
