//! The protocol's schema documents: the canonical multi-version document and the strict export
//! of each version (generated from it and checked in), with one compiled validator per version.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, OnceLock};

use agentwire_schema::{SchemaDocument, Validator, ValidatorCompiler};
use serde_json::Value;

use crate::version::ProtocolVersion;

/// The canonical multi-version document (`protocols/roll-runtime/roll-runtime.schema.json`).
pub const CANONICAL_SCHEMA: &str =
    include_str!("../../../protocols/roll-runtime/roll-runtime.schema.json");

/// The canonical document, loaded once; `Err` only if the checked-in document failed to load (a
/// build defect the schema tests catch), which every projection then reports.
pub fn canonical_document() -> Result<&'static SchemaDocument, &'static str> {
    static DOCUMENT: OnceLock<Result<SchemaDocument, String>> = OnceLock::new();
    DOCUMENT
        .get_or_init(|| {
            SchemaDocument::from_slice(CANONICAL_SCHEMA.as_bytes()).map_err(|e| e.to_string())
        })
        .as_ref()
        .map_err(String::as_str)
}

/// The built-in protocol name.
pub const PROTOCOL_NAME: &str = "roll-runtime";

/// The strict JSON Schema (2020-12) of exactly `version`, as checked-in canonical text.
pub fn export_text(version: ProtocolVersion) -> &'static str {
    match version {
        ProtocolVersion::V1_0 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.0.schema.json")
        }
        ProtocolVersion::V1_1 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.1.schema.json")
        }
        ProtocolVersion::V1_2 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.2.schema.json")
        }
        ProtocolVersion::V1_3 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.3.schema.json")
        }
        ProtocolVersion::V1_4 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.4.schema.json")
        }
        ProtocolVersion::V1_5 => {
            include_str!("../../../protocols/roll-runtime/exports/roll-runtime-1.5.schema.json")
        }
    }
}

/// One place where a message broke its version's schema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SchemaIssue {
    /// JSON Pointer into the message.
    pub instance_path: String,
    /// JSON Pointer into the export (the keyword that failed).
    pub schema_path: String,
    /// What is wrong.
    pub message: String,
}

struct Compiled {
    export: Value,
    /// `None` only if a checked-in export failed to load (a build defect the export tests
    /// catch); every message is then rejected rather than accepted unchecked.
    compiler: Option<ValidatorCompiler>,
    root: Option<Validator>,
    /// Definition validators, compiled on first use; the set of names is bounded by the export.
    definitions: Mutex<HashMap<String, Arc<Validator>>>,
}

fn compiled(version: ProtocolVersion) -> &'static Compiled {
    static CELLS: [OnceLock<Compiled>; 6] = [const { OnceLock::new() }; 6];
    CELLS[version as usize].get_or_init(|| {
        // The exports are checked in and tested to compile; a failure here is a build defect,
        // never caused by input, so it falls back to rejecting everything.
        let export: Value =
            serde_json::from_str(export_text(version)).unwrap_or(Value::Bool(false));
        let compiler = SchemaDocument::from_value(export.clone())
            .ok()
            .and_then(|doc| ValidatorCompiler::new(&doc).ok());
        let root = compiler.as_ref().and_then(|c| c.root().ok());
        Compiled {
            export,
            compiler,
            root,
            definitions: Mutex::new(HashMap::new()),
        }
    })
}

fn issues(validator: Option<&Validator>, value: &Value) -> Result<(), Vec<SchemaIssue>> {
    let Some(validator) = validator else {
        return Err(vec![SchemaIssue {
            instance_path: String::new(),
            schema_path: String::new(),
            message: "the schema of this version failed to compile".to_owned(),
        }]);
    };
    if validator.is_valid(value) {
        return Ok(());
    }
    Err(validator
        .validate(value)
        .into_iter()
        .map(|issue| SchemaIssue {
            instance_path: issue.instance_pointer,
            schema_path: issue.schema_pointer,
            message: issue.message,
        })
        .collect())
}

/// The parsed strict export of `version`.
pub fn export(version: ProtocolVersion) -> &'static Value {
    &compiled(version).export
}

/// Whether `message` is a valid message of `version`.
pub fn is_valid(version: ProtocolVersion, message: &Value) -> bool {
    compiled(version)
        .root
        .as_ref()
        .is_some_and(|validator| validator.is_valid(message))
}

/// Validates one whole message (any kind) against `version`'s export.
pub fn validate_message(version: ProtocolVersion, message: &Value) -> Result<(), Vec<SchemaIssue>> {
    issues(compiled(version).root.as_ref(), message)
}

/// Validates `value` against one definition of `version`'s export (`$defs/<name>`).
pub fn validate_definition(
    version: ProtocolVersion,
    name: &str,
    value: &Value,
) -> Result<(), Vec<SchemaIssue>> {
    let validator = definition_validator(version, name).ok_or_else(|| {
        vec![SchemaIssue {
            instance_path: String::new(),
            schema_path: format!("/$defs/{name}"),
            message: format!("{name} does not exist in version {version}"),
        }]
    })?;
    issues(Some(&validator), value)
}

/// The validator of one definition of `version`'s export, compiled once.
fn definition_validator(version: ProtocolVersion, name: &str) -> Option<Arc<Validator>> {
    let compiled = compiled(version);
    if let Ok(map) = compiled.definitions.lock()
        && let Some(found) = map.get(name)
    {
        return Some(Arc::clone(found));
    }
    let validator = Arc::new(compiled.compiler.as_ref()?.definition(name).ok()?);
    if let Ok(mut map) = compiled.definitions.lock() {
        map.insert(name.to_owned(), Arc::clone(&validator));
    }
    Some(validator)
}
