//! The protocol's schema documents: the canonical multi-version document and the strict export
//! of each version (generated from it and checked in), with one compiled validator per version.

use std::sync::OnceLock;

use serde_json::Value;

use crate::version::ProtocolVersion;

/// The canonical multi-version document (`protocols/roll-runtime/roll-runtime.schema.json`).
pub const CANONICAL_SCHEMA: &str =
    include_str!("../../../protocols/roll-runtime/roll-runtime.schema.json");

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
    /// `None` only if a checked-in export failed to compile (a build defect the export tests
    /// catch); every message is then rejected rather than accepted unchecked.
    validator: Option<jsonschema::Validator>,
}

fn compiled(version: ProtocolVersion) -> &'static Compiled {
    static CELLS: [OnceLock<Compiled>; 6] = [const { OnceLock::new() }; 6];
    CELLS[version as usize].get_or_init(|| {
        // The exports are checked in and tested to compile; a failure here is a build defect,
        // never caused by input, so it falls back to a schema that rejects everything.
        let export: Value =
            serde_json::from_str(export_text(version)).unwrap_or(Value::Bool(false));
        let validator = build_validator(&export);
        Compiled { export, validator }
    })
}

fn build_validator(schema: &Value) -> Option<jsonschema::Validator> {
    jsonschema::options()
        .with_draft(jsonschema::Draft::Draft202012)
        .should_validate_formats(true)
        .build(schema)
        .ok()
}

fn issues(
    validator: Option<&jsonschema::Validator>,
    value: &Value,
) -> Result<(), Vec<SchemaIssue>> {
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
        .iter_errors(value)
        .map(|error| SchemaIssue {
            instance_path: error.instance_path().to_string(),
            schema_path: error.schema_path().to_string(),
            message: error.to_string(),
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
        .validator
        .as_ref()
        .is_some_and(|validator| validator.is_valid(message))
}

/// Validates one whole message (any kind) against `version`'s export.
pub fn validate_message(version: ProtocolVersion, message: &Value) -> Result<(), Vec<SchemaIssue>> {
    issues(compiled(version).validator.as_ref(), message)
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
    issues(Some(validator), value)
}

/// Definitions that typed parsing validates one by one (params, results, envelopes).
fn definition_validator(
    version: ProtocolVersion,
    name: &str,
) -> Option<&'static jsonschema::Validator> {
    use std::collections::HashMap;
    use std::sync::Mutex;
    type Cache = Mutex<HashMap<(ProtocolVersion, String), &'static jsonschema::Validator>>;
    static CACHE: OnceLock<Cache> = OnceLock::new();
    let cache = CACHE.get_or_init(|| Mutex::new(HashMap::new()));
    let key = (version, name.to_owned());
    if let Ok(map) = cache.lock()
        && let Some(found) = map.get(&key)
    {
        return Some(found);
    }
    let export = export(version);
    export.get("$defs")?.get(name)?;
    let mut wrapper = export.clone();
    if let Value::Object(map) = &mut wrapper {
        map.remove("oneOf");
        map.insert("$ref".into(), Value::String(format!("#/$defs/{name}")));
    }
    let validator = build_validator(&wrapper)?;
    // The set of (version, definition) pairs is finite and small, so leaking one validator per
    // pair bounds memory by the schema, not by input.
    let leaked: &'static jsonschema::Validator = Box::leak(Box::new(validator));
    if let Ok(mut map) = cache.lock() {
        map.insert(key, leaked);
    }
    Some(leaked)
}
