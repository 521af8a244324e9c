//! `agentwire gen`: typed bindings from a schema document, and `--check` for stale ones.

use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Component, Path, PathBuf};

use agentwire_codegen::{Language, Options, Staleness};
use anyhow::Context;
use serde_json::json;

use crate::output::{self, Format};

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Languages, comma-separated: rust, ts, py, kt, swift.
    #[arg(long, default_value = "rust,ts,py,kt,swift")]
    lang: String,
    /// Output folder; each language goes to a subfolder named after it.
    #[arg(long)]
    out: PathBuf,
    /// Compare instead of writing: exit 1 listing every stale or missing file.
    #[arg(long)]
    check: bool,
    /// File stem of the outputs (default: from the schema file name; `schema` for `-`): letters, digits, `_`, `-`
    /// and `.`, starting with a letter, a digit or `_`.
    #[arg(long, value_parser = parse_stem)]
    name: Option<String>,
    /// Kotlin package (default: agentwire.generated.<name>).
    #[arg(long)]
    kotlin_package: Option<String>,
    /// Name of the root message type (default: <ProtocolName>Message or ProtocolMessage).
    #[arg(long)]
    root_name: Option<String>,
    /// PROTOCOL_VERSION for a schema whose identity block has none (an error if it has another).
    #[arg(long)]
    protocol_version: Option<String>,
    /// PROTOCOL_MIN_VERSION for a schema whose identity block has none (an error if it has another).
    #[arg(long)]
    min_version: Option<String>,
    /// Generate Rust types from the all-versions view of a document annotated with wire versions:
    /// one set of types that decodes the messages of every version (docs/codegen.md).
    #[arg(long)]
    all_versions: bool,
    /// A JSON object of Rust types to use in place of generated ones: `"Type"`,
    /// `"Type.property"` or `"*.property"` to a Rust path (docs/codegen.md).
    #[arg(long)]
    rust_types: Option<PathBuf>,
    /// Schema document.
    schema: PathBuf,
}

/// Checks that `--name` is a plain file stem, so that every output stays inside `--out`.
fn parse_stem(text: &str) -> Result<String, String> {
    let mut chars = text.chars();
    let Some(first) = chars.next() else {
        return Err("a file stem cannot be empty".to_owned());
    };
    if !(first.is_alphanumeric() || first == '_') {
        return Err(format!(
            "{text:?} is not a plain file stem: it must start with a letter, a digit or `_`"
        ));
    }
    if let Some(bad) = text
        .chars()
        .find(|c| !(c.is_alphanumeric() || "_-.".contains(*c)))
    {
        return Err(format!(
            "{text:?} is not a plain file stem: {bad:?} is not allowed (letters, digits, `_`, `-` and `.` are; no path separators)"
        ));
    }
    Ok(text.to_owned())
}

/// Refuses a generated path that would leave the output folder.
fn inside_out(path: &Path) -> anyhow::Result<()> {
    if path.components().all(|c| matches!(c, Component::Normal(_))) {
        return Ok(());
    }
    Err(crate::cmd::Usage::new(
        "usage.path-escapes-out",
        format!(
            "the generated path {} would leave the output folder",
            path.display()
        ),
    )
    .into())
}

/// The command that regenerates exactly what `args` checks.
fn fix_command(args: &Args, languages: &[Language]) -> String {
    let mut parts = vec![
        "agentwire gen".to_owned(),
        format!(
            "--lang {}",
            languages
                .iter()
                .map(|l| l.code())
                .collect::<Vec<_>>()
                .join(",")
        ),
        format!("--out {}", shell_word(&args.out)),
    ];
    if let Some(name) = &args.name {
        parts.push(format!("--name {name}"));
    }
    if let Some(package) = &args.kotlin_package {
        parts.push(format!("--kotlin-package {package}"));
    }
    if let Some(root) = &args.root_name {
        parts.push(format!("--root-name {root}"));
    }
    if let Some(version) = &args.protocol_version {
        parts.push(format!("--protocol-version {version}"));
    }
    if let Some(version) = &args.min_version {
        parts.push(format!("--min-version {version}"));
    }
    if args.all_versions {
        parts.push("--all-versions".to_owned());
    }
    if let Some(file) = &args.rust_types {
        parts.push(format!("--rust-types {}", shell_word(file)));
    }
    parts.push(shell_word(&args.schema));
    parts.join(" ")
}

fn shell_word(path: &Path) -> String {
    let text = path.display().to_string();
    if !text.is_empty()
        && text
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "/._-+=:,@".contains(c))
    {
        text
    } else {
        format!("'{}'", text.replace('\'', "'\\''"))
    }
}

/// Reads a `--rust-types` file: a JSON object whose values are strings.
fn read_rust_types(file: &Path) -> anyhow::Result<BTreeMap<String, String>> {
    // Read as every input is (at most 256 MiB) and parsed strictly (no duplicate keys).
    let bytes = crate::input::read_document(file)?;
    let value = agentwire_schema::parse_json(&bytes)
        .with_context(|| format!("{} is not JSON", file.display()))?;
    let serde_json::Value::Object(entries) = value else {
        anyhow::bail!("{} must hold a JSON object of Rust types", file.display());
    };
    let mut out = BTreeMap::new();
    for (key, path) in entries {
        let serde_json::Value::String(path) = path else {
            anyhow::bail!(
                "{}: the Rust type of {key:?} must be a string",
                file.display()
            );
        };
        out.insert(key, path);
    }
    Ok(out)
}

pub(crate) fn run(args: Args, format: Format, out: &mut dyn Write) -> anyhow::Result<u8> {
    let languages = Language::parse_list(&args.lang)?;
    if languages.is_empty() {
        return Err(crate::cmd::Usage::new(
            "usage.no-language",
            "--lang names no language; expected some of rust, ts, py, kt, swift",
        )
        .into());
    }
    let doc = output::load_schema(&args.schema)?;
    // Outputs are named after the schema file; a schema from standard input is `schema`.
    let schema_name = Some(&args.schema)
        .filter(|path| !crate::input::is_stdin(path))
        .and_then(|path| path.file_name())
        .and_then(|f| f.to_str())
        .map(str::to_owned)
        .unwrap_or_else(|| "schema.json".to_owned());
    let mut options = Options::for_schema(&schema_name);
    if let Some(name) = &args.name {
        options.base_name = name.clone();
        if args.kotlin_package.is_none() {
            options = Options {
                kotlin_package: format!("agentwire.generated.{name}"),
                ..options
            };
        }
    }
    if let Some(package) = &args.kotlin_package {
        options.kotlin_package = package.clone();
    }
    options.root_name = args.root_name.clone();
    options.protocol_version = args.protocol_version.clone();
    options.min_version = args.min_version.clone();
    options.all_versions = args.all_versions;
    if let Some(file) = &args.rust_types {
        options.rust_types = read_rust_types(file)?;
    }
    let files = agentwire_codegen::generate_from_document(&doc, &schema_name, &languages, &options)
        .with_context(|| format!("cannot generate bindings for {}", args.schema.display()))?;
    for file in &files {
        inside_out(Path::new(&file.path))?;
    }
    let command = fix_command(&args, &languages);
    if args.check {
        let stale = agentwire_codegen::check(&args.out, &files);
        match format {
            Format::Human => {
                for (path, why) in &stale {
                    let why = match why {
                        Staleness::Missing => "missing",
                        Staleness::Differs => "stale",
                    };
                    writeln!(out, "{why}: {}", args.out.join(path).display())?;
                }
                if stale.is_empty() {
                    writeln!(
                        out,
                        "up to date: {} file(s) in {}",
                        files.len(),
                        args.out.display()
                    )?;
                } else {
                    writeln!(
                        out,
                        "{} of {} generated file(s) out of date; run: {command}",
                        stale.len(),
                        files.len()
                    )?;
                }
            }
            Format::Json => {
                let report: Vec<_> = files
                    .iter()
                    .map(|f| {
                        let status = match stale.iter().find(|(p, _)| p == &f.path) {
                            Some((_, Staleness::Missing)) => "missing",
                            Some((_, Staleness::Differs)) => "stale",
                            None => "ok",
                        };
                        json!({"path": args.out.join(&f.path).display().to_string(), "status": status})
                    })
                    .collect();
                writeln!(
                    out,
                    "{}",
                    json!({"out": args.out.display().to_string(), "up_to_date": stale.is_empty(), "files": report, "command": command})
                )?;
            }
        }
        return Ok(if stale.is_empty() {
            output::EXIT_OK
        } else {
            output::EXIT_FOUND
        });
    }
    let written = agentwire_codegen::write(&args.out, &files)?;
    match format {
        Format::Human => {
            for f in &files {
                let status = if written.contains(&f.path) {
                    "wrote"
                } else {
                    "unchanged"
                };
                writeln!(
                    out,
                    "{status}: {} ({} lines)",
                    args.out.join(&f.path).display(),
                    f.contents.lines().count()
                )?;
            }
        }
        Format::Json => {
            let report: Vec<_> = files
                .iter()
                .map(|f| {
                    json!({
                        "path": args.out.join(&f.path).display().to_string(),
                        "status": if written.contains(&f.path) { "written" } else { "unchanged" },
                        "lines": f.contents.lines().count(),
                        "bytes": f.contents.len(),
                    })
                })
                .collect();
            writeln!(
                out,
                "{}",
                json!({"out": args.out.display().to_string(), "files": report, "command": command})
            )?;
        }
    }
    Ok(output::EXIT_OK)
}
