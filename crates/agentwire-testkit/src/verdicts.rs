//! Cross-validator runners: other people's validators judging many instances per process start,
//! so that our validator's verdicts can be compared with theirs one instance at a time.
//!
//! Each runner writes the instances as NDJSON to a temporary file, runs one script from
//! `tools/node` or `tools/python`, and reads back one JSON verdict line per instance.

use std::path::Path;
use std::process::Command;

use serde::Deserialize;
use serde_json::Value;

use crate::process::{run_ok, write_temp_ndjson};
use crate::tools::{node_script, python_script};

/// One validator's judgement of one instance.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// Whether the validator accepted the instance.
    pub valid: bool,
    /// JSON Pointer (RFC 6901, `""` for the root) into the instance where the validator's first
    /// reported error sits; `None` when valid. Ajv reports errors in its own order, Python
    /// jsonschema's first error is its `best_match`, and the ChainlessChain SDK points a missing
    /// required property at the property itself rather than at its parent object.
    pub first_error_instance_path: Option<String>,
    /// Every error, as `#<pointer> <message>` (with `[<keyword>]` when the validator names one).
    pub errors: Vec<String>,
}

impl Verdict {
    /// The instance paths of all errors, in reported order.
    pub fn error_paths(&self) -> Vec<&str> {
        self.errors
            .iter()
            .map(|error| {
                error
                    .strip_prefix('#')
                    .and_then(|rest| rest.split(' ').next())
                    .unwrap_or_default()
            })
            .collect()
    }
}

#[derive(Debug, Deserialize)]
struct RawVerdict {
    valid: bool,
    errors: Vec<RawError>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct RawError {
    instance_path: String,
    #[serde(default)]
    keyword: Option<String>,
    message: String,
}

impl From<RawVerdict> for Verdict {
    fn from(raw: RawVerdict) -> Self {
        let first_error_instance_path = if raw.valid {
            None
        } else {
            raw.errors.first().map(|error| error.instance_path.clone())
        };
        let errors = raw
            .errors
            .into_iter()
            .map(|error| match error.keyword {
                Some(keyword) => {
                    format!("#{} {} [{keyword}]", error.instance_path, error.message)
                }
                None => format!("#{} {}", error.instance_path, error.message),
            })
            .collect();
        Verdict {
            valid: raw.valid,
            first_error_instance_path,
            errors,
        }
    }
}

/// Ajv 8 verdicts for `instances` against the schema file at `schema_path`, or against its
/// definition `definition` (a key of `$defs`, or of `definitions` when there is no `$defs`).
///
/// The draft is taken from the schema's `$schema` (draft-07 → `Ajv`, 2019-09 → `Ajv2019`,
/// 2020-12 → `Ajv2020`); formats are checked with ajv-formats; `strict: false`, `allErrors: true`.
/// A named definition is validated as `{"$ref": "#/<defs keyword>/<name>"}` inside the same
/// document (its `$id` and definitions kept), so references resolve as from the root.
///
/// # Panics
/// When Node.js or the npm packages are missing, the schema has no supported `$schema`, the
/// definition does not exist, or Ajv cannot compile the schema.
pub fn ajv_verdicts(
    schema_path: impl AsRef<Path>,
    definition: Option<&str>,
    instances: &[Value],
) -> Vec<Verdict> {
    let mut command = node_script("ajv-verdicts.mjs");
    command
        .arg(schema_path.as_ref())
        .arg(definition.unwrap_or("-"));
    run_batch(command, instances)
}

/// Python `jsonschema` verdicts for `instances` against the schema file at `schema_path`, or
/// against its definition `definition`, chosen as in [`ajv_verdicts`].
///
/// The validator class comes from `$schema` (`Draft7Validator`, `Draft201909Validator`,
/// `Draft202012Validator`); formats are checked with `jsonschema.FormatChecker()`, which knows
/// every draft's formats (date-time, uri, email, uuid, ...), as ajv-formats does.
///
/// # Panics
/// When the virtual environment is missing, the schema has no supported `$schema`, the
/// definition does not exist, or jsonschema rejects the schema.
pub fn py_jsonschema_verdicts(
    schema_path: impl AsRef<Path>,
    definition: Option<&str>,
    instances: &[Value],
) -> Vec<Verdict> {
    let mut command = python_script("jsonschema_verdicts.py");
    command
        .arg(schema_path.as_ref())
        .arg(definition.unwrap_or("-"));
    run_batch(command, instances)
}

/// Verdicts of the ChainlessChain SDK's own validator (`chainlesschain-agent-sdk==0.2.9`):
/// `validate_protocol_message` for the whole protocol, or
/// `validate_protocol_definition(name, value)` for a named `$defs` entry.
///
/// The SDK's validator is its own hand-written subset of JSON Schema; it is the reference for
/// what ChainlessChain peers accept, not for JSON Schema semantics.
///
/// # Panics
/// When the virtual environment is missing or the definition does not exist.
pub fn cc_sdk_verdicts(instances: &[Value], definition: Option<&str>) -> Vec<Verdict> {
    let mut command = python_script("cc_sdk_verdicts.py");
    command.arg(definition.unwrap_or("-"));
    run_batch(command, instances)
}

/// Appends the NDJSON instance file as the last argument, runs the command and parses one
/// verdict per output line.
fn run_batch(mut command: Command, instances: &[Value]) -> Vec<Verdict> {
    if instances.is_empty() {
        return Vec::new();
    }
    let file = write_temp_ndjson(instances);
    command.arg(file.path());
    let output = run_ok(&mut command);
    let stdout = String::from_utf8_lossy(&output.stdout);
    let verdicts: Vec<Verdict> = stdout
        .lines()
        .filter(|line| !line.trim().is_empty())
        .map(|line| match serde_json::from_str::<RawVerdict>(line) {
            Ok(raw) => Verdict::from(raw),
            Err(error) => {
                panic!("{command:?} printed a line that is not a verdict ({error}): {line}")
            }
        })
        .collect();
    if verdicts.len() != instances.len() {
        panic!(
            "{command:?} printed {} verdicts for {} instances\n--- stderr ---\n{}",
            verdicts.len(),
            instances.len(),
            String::from_utf8_lossy(&output.stderr)
        );
    }
    verdicts
}
