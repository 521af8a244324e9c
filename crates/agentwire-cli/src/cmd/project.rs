//! `agentwire project --schema S --to V [--from V] [--def NAME] [INPUT|-]`: projects messages (an
//! NDJSON stream or one JSON document) of one wire version down to an older one. `--protocol
//! roll-runtime` adds the protocol's own hooks (agentwire-roll's `RollProjector`) to the generic
//! annotation engine. A message that says its own version is read at that version.

use std::collections::hash_map::Entry;
use std::collections::{HashMap, HashSet};
use std::io::Write;
use std::path::PathBuf;

use agentwire_roll::ProtocolVersion;
use agentwire_roll::project::RollProjector;
use agentwire_schema::{
    JsonErrorKind, ProjectError, ProjectTarget, Projector, SchemaDocument, parse_json, pointer,
};
use anyhow::Context;
use serde_json::{Value, json};

use crate::cmd::Usage;
use crate::input::{self, Line, MAX_LINE_BYTES};
use crate::output::{self, Format};

/// Deepest schema nesting searched for the places where a message says its version.
const MAX_VERSION_SITE_DEPTH: usize = 64;

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
    /// The wire version of messages that do not say theirs (default: the document's newest).
    #[arg(long)]
    from: Option<String>,
    /// Project instances of this definition instead of the document's root schema.
    #[arg(long = "def")]
    definition: Option<String>,
    /// Messages: NDJSON (one per line) or one JSON document (`-` or nothing for standard input).
    #[arg(default_value = "-")]
    input: PathBuf,
}

/// Why one message cannot be projected.
struct Failure {
    code: String,
    pointer: String,
    message: String,
}

impl From<ProjectError> for Failure {
    fn from(e: ProjectError) -> Self {
        Failure {
            code: e.code().to_owned(),
            pointer: e.pointer.clone(),
            message: e.message,
        }
    }
}

/// What projects one message: the generic engine over an annotated document, or over a built-in
/// protocol's document with that protocol's hooks.
enum Engine {
    Generic {
        doc: Box<SchemaDocument>,
        definition: Option<String>,
        from: String,
        to: String,
        /// Projectors by source version, built on first use; only versions the document has
        /// get one, so the map stays as small as the document's list of versions.
        projectors: HashMap<String, Projector>,
        sites: Vec<String>,
    },
    Roll {
        from: ProtocolVersion,
        to: ProtocolVersion,
        /// Projectors by source version, built on first use (at most one per Roll version).
        projectors: HashMap<ProtocolVersion, RollProjector>,
        sites: Vec<String>,
    },
}

impl Engine {
    fn new(args: &Args) -> anyhow::Result<Engine> {
        if let Some(name) = &args.protocol {
            let from = crate::protocols::Builtin::find(name, args.from.as_deref())?.version;
            let to = crate::protocols::Builtin::find(name, Some(&args.to))?.version;
            if to > from {
                return Err(upward(from.as_str(), to.as_str()));
            }
            let canonical = parse_json(agentwire_roll::schema::CANONICAL_SCHEMA.as_bytes())
                .context("the built-in roll-runtime schema")?;
            return Ok(Engine::Roll {
                from,
                to,
                projectors: HashMap::new(),
                sites: version_sites(&canonical, ""),
            });
        }
        let Some(path) = &args.schema else {
            return Err(crate::cmd::Usage::new(
                "usage.no-schema",
                "--schema FILE or --protocol NAME is required",
            )
            .into());
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
        let projector = Projector::new(&doc, &from, &args.to, target).map_err(|e| {
            if e.kind == agentwire_schema::ProjectErrorKind::NotDownward {
                upward(&from, &args.to)
            } else {
                anyhow::Error::from(e)
            }
        })?;
        let root = match &args.definition {
            Some(name) => doc.definition_pointer(name)?,
            None => String::new(),
        };
        let sites = version_sites(doc.value(), &root);
        Ok(Engine::Generic {
            doc: Box::new(doc),
            definition: args.definition.clone(),
            from: from.clone(),
            to: args.to.clone(),
            projectors: HashMap::from([(from, projector)]),
            sites,
        })
    }

    /// The projected message, or why it cannot be projected.
    fn project(&mut self, message: &Value) -> Result<Value, Failure> {
        match self {
            Engine::Generic {
                doc,
                definition,
                from,
                to,
                projectors,
                sites,
            } => {
                let source = stated_version(message, sites).unwrap_or(from.as_str());
                if !projectors.contains_key(source) {
                    let target = match definition {
                        Some(name) => ProjectTarget::Definition(name),
                        None => ProjectTarget::Root,
                    };
                    let projector = Projector::new(doc, source, to, target)?;
                    projectors.insert(source.to_owned(), projector);
                }
                match projectors.get(source) {
                    Some(projector) => Ok(projector.project(message)?),
                    None => Err(Failure {
                        code: "project.version".to_owned(),
                        pointer: String::new(),
                        message: format!("no projector for version {source}"),
                    }),
                }
            }
            Engine::Roll {
                from,
                to,
                projectors,
                sites,
            } => {
                let source = match roll_stated_version(message, sites) {
                    Some((text, at)) => ProtocolVersion::parse(text).ok_or_else(|| Failure {
                        code: "roll.project.unknown-version".to_owned(),
                        pointer: at,
                        message: format!(
                            "the message says it is version {text:?}, which roll-runtime does not have"
                        ),
                    })?,
                    None => *from,
                };
                let failure = |e: agentwire_roll::project::ProjectionError| Failure {
                    code: e.code().to_owned(),
                    pointer: String::new(),
                    message: e.to_string(),
                };
                let projector = match projectors.entry(source) {
                    Entry::Occupied(found) => found.into_mut(),
                    Entry::Vacant(slot) => {
                        slot.insert(RollProjector::new(source, *to).map_err(failure)?)
                    }
                };
                projector.project(message).map_err(failure)
            }
        }
    }
}

fn upward(from: &str, to: &str) -> anyhow::Error {
    Usage::new(
        "usage.upward-projection",
        format!("projection goes down only: --to {to} is newer than --from {from}"),
    )
    .into()
}

/// JSON Pointers into a message where it says its own wire version: the properties the schema
/// marks `x-agentwire-version-const`, reached from `root` through `$ref`, unions, `allOf`,
/// conditionals and `properties` (not through array items or maps, whose members do not speak
/// for the message).
fn version_sites(doc: &Value, root: &str) -> Vec<String> {
    let mut sites = Vec::new();
    let mut seen: HashSet<(String, String)> = HashSet::new();
    let mut stack = vec![(root.to_owned(), String::new(), 0usize)];
    while let Some((at, instance, depth)) = stack.pop() {
        if depth > MAX_VERSION_SITE_DEPTH || !seen.insert((at.clone(), instance.clone())) {
            continue;
        }
        let Some(Value::Object(node)) = pointer::resolve(doc, &at) else {
            continue;
        };
        if node.get("x-agentwire-version-const") == Some(&Value::Bool(true))
            && !sites.contains(&instance)
        {
            sites.push(instance.clone());
        }
        if let Some(Value::String(reference)) = node.get("$ref")
            && let Some(target) = reference.strip_prefix('#')
            && let Some(target) = percent_decode(target)
        {
            stack.push((target, instance.clone(), depth + 1));
        }
        for keyword in ["oneOf", "anyOf", "allOf"] {
            if let Some(Value::Array(branches)) = node.get(keyword) {
                for i in 0..branches.len() {
                    let branch = format!("{at}/{keyword}/{i}");
                    stack.push((branch, instance.clone(), depth + 1));
                }
            }
        }
        for keyword in ["then", "else"] {
            if node.contains_key(keyword) {
                stack.push((format!("{at}/{keyword}"), instance.clone(), depth + 1));
            }
        }
        if let Some(Value::Object(properties)) = node.get("properties") {
            for name in properties.keys() {
                let property = pointer::push(&format!("{at}/properties"), name);
                stack.push((property, pointer::push(&instance, name), depth + 1));
            }
        }
    }
    sites.sort();
    sites
}

/// Decodes the percent escapes of a URI fragment; `None` when they are malformed.
fn percent_decode(text: &str) -> Option<String> {
    if !text.contains('%') {
        return Some(text.to_owned());
    }
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = text.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

/// The version a message states at one of `sites`.
fn stated_version<'m>(message: &'m Value, sites: &[String]) -> Option<&'m str> {
    sites
        .iter()
        .find_map(|site| pointer::resolve(message, site).and_then(Value::as_str))
}

/// The version a Roll message states, and where: an annotated site, or an `initialize`
/// request's `params.protocolVersion` (or a `params.protocolVersions` naming exactly one).
fn roll_stated_version<'m>(message: &'m Value, sites: &[String]) -> Option<(&'m str, String)> {
    if message.get("method").and_then(Value::as_str) == Some("initialize") {
        let params = message.get("params");
        if let Some(v) = params
            .and_then(|p| p.get("protocolVersion"))
            .and_then(Value::as_str)
        {
            return Some((v, "/params/protocolVersion".to_owned()));
        }
        if let Some([Value::String(v)]) = params
            .and_then(|p| p.get("protocolVersions"))
            .and_then(Value::as_array)
            .map(Vec::as_slice)
        {
            return Some((v, "/params/protocolVersions/0".to_owned()));
        }
    }
    sites.iter().find_map(|site| {
        pointer::resolve(message, site)
            .and_then(Value::as_str)
            .map(|v| (v, site.clone()))
    })
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    // The schema read from standard input leaves nothing there for the messages.
    input::stdin_at_most_once(args.schema.iter().chain([&args.input]))?;
    let mut engine = Engine::new(&args)?;
    let (mut lines, _) = input::ndjson(&args.input, MAX_LINE_BYTES)?;
    let mut run = Run {
        out,
        format,
        failed: 0,
    };
    // The first message decides the shape of the input: a line that is a whole JSON value starts
    // an NDJSON stream; a line that ends inside a value starts one (pretty-printed) document.
    let Some(first) = lines.next_line()? else {
        return Ok(output::EXIT_OK);
    };
    if let Line::Text(text) = first.line {
        match parse_json(text) {
            Err(e) if e.kind == JsonErrorKind::UnexpectedEnd => {
                let mut document = vec![b'\n'; first.number as usize - 1];
                document.extend_from_slice(text);
                document.push(b'\n');
                let rest = input::read_all(lines.into_inner(), &args.input)?;
                document.extend_from_slice(&rest);
                run.document(&mut engine, &document)?;
                return Ok(run.exit_code());
            }
            parsed => run.line(&mut engine, first.number, parsed)?,
        }
    } else {
        run.too_long(first.number, first.line)?;
    }
    loop {
        // Output is buffered, and flushed whenever the input has nothing more buffered: a file
        // is written in large blocks, and a live stream's projections leave before the next
        // read waits.
        if lines.buffered().is_empty() {
            run.out.flush()?;
        }
        let Some(line) = lines.next_line()? else {
            break;
        };
        match line.line {
            Line::Text(text) => run.line(&mut engine, line.number, parse_json(text))?,
            other => run.too_long(line.number, other)?,
        }
    }
    Ok(run.exit_code())
}

/// The output of one run and its count of failures.
struct Run<'o> {
    out: &'o mut dyn Write,
    format: Format,
    failed: usize,
}

impl Run<'_> {
    fn exit_code(&self) -> u8 {
        if self.failed == 0 {
            output::EXIT_OK
        } else {
            output::EXIT_FOUND
        }
    }

    fn line(
        &mut self,
        engine: &mut Engine,
        number: u64,
        parsed: Result<Value, agentwire_schema::JsonError>,
    ) -> anyhow::Result<()> {
        let message = match parsed {
            Ok(m) => m,
            Err(e) => {
                return self.report(
                    Some(number),
                    &Failure {
                        code: e.kind.code().to_owned(),
                        pointer: String::new(),
                        message: e.to_string(),
                    },
                );
            }
        };
        match engine.project(&message) {
            Ok(projected) => writeln!(
                self.out,
                "{}",
                agentwire_schema::canonical::compact_text(&projected)
            )?,
            Err(failure) => self.report(Some(number), &failure)?,
        }
        Ok(())
    }

    fn too_long(&mut self, number: u64, line: Line<'_>) -> anyhow::Result<()> {
        let length = match line {
            Line::TooLong(length) => length,
            Line::Text(text) => text.len() as u64,
        };
        self.report(
            Some(number),
            &Failure {
                code: input::LINE_TOO_LONG.to_owned(),
                pointer: String::new(),
                message: input::line_too_long_message(length),
            },
        )
    }

    /// One pretty-printed document: projected and written in canonical text.
    fn document(&mut self, engine: &mut Engine, bytes: &[u8]) -> anyhow::Result<()> {
        let message = match parse_json(bytes) {
            Ok(m) => m,
            Err(e) => {
                return self.report(
                    None,
                    &Failure {
                        code: e.kind.code().to_owned(),
                        pointer: String::new(),
                        message: e.to_string(),
                    },
                );
            }
        };
        match engine.project(&message) {
            Ok(projected) => self
                .out
                .write_all(agentwire_schema::canonical_text(&projected, true).as_bytes())?,
            Err(failure) => self.report(None, &failure)?,
        }
        Ok(())
    }

    /// A message that cannot be projected: a JSON error line in its place on standard output
    /// for programs, a line on standard error for people.
    fn report(&mut self, line: Option<u64>, failure: &Failure) -> anyhow::Result<()> {
        self.failed += 1;
        let Failure {
            code,
            pointer,
            message,
        } = failure;
        match self.format {
            Format::Json => writeln!(
                self.out,
                "{}",
                json!({"error": {"line": line, "code": code, "pointer": pointer, "message": message}})
            )?,
            Format::Human => {
                let at = if pointer.is_empty() {
                    String::new()
                } else {
                    format!(" at {pointer}")
                };
                let place = match line {
                    Some(n) => format!("line {n}"),
                    None => "document".to_owned(),
                };
                // Standard output keeps only projections; what it holds goes first.
                self.out.flush()?;
                let _ = writeln!(std::io::stderr(), "{place}: {code}{at}: {message}");
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn version_sites_follow_refs_unions_and_properties_but_not_items() {
        let doc = json!({
            "oneOf": [{"$ref": "#/$defs/Event"}, {"$ref": "#/$defs/Re%73ult"}],
            "$defs": {
                "Event": {"properties": {"params": {"$ref": "#/$defs/Envelope"}}},
                "Envelope": {"properties": {
                    "protocolVersion": {"type": "string", "x-agentwire-version-const": true},
                    "history": {"items": {"$ref": "#/$defs/Envelope"}}
                }},
                "Result": {"allOf": [{"properties": {"result": {"properties": {
                    "version": {"x-agentwire-version-const": true}
                }}}}]},
                "Loop": {"$ref": "#/$defs/Loop"}
            }
        });
        assert_eq!(
            version_sites(&doc, ""),
            vec!["/params/protocolVersion", "/result/version"]
        );
        let message = json!({"params": {"protocolVersion": "1.2"}});
        let sites = version_sites(&doc, "");
        assert_eq!(stated_version(&message, &sites), Some("1.2"));
        assert_eq!(stated_version(&json!({"params": {}}), &sites), None);
        assert_eq!(version_sites(&doc, "/$defs/Loop"), Vec::<String>::new());
    }
}
