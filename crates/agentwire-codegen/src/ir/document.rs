//! What the IR reads from the document as a whole rather than from one schema node: the
//! protocol identity and the method and event name lists.

use agentwire_schema::SchemaDocument;
use agentwire_schema::identity::{AGENTWIRE_IDENTITY, CHAINLESSCHAIN_IDENTITY, IdentitySource};
use agentwire_schema::versions::WireVersion;
use serde_json::Value;

use super::lower::dedup;
use super::types::{Identity, Version};
use super::union::string_values;
use crate::error::CodegenError;

/// The identity through the schema engine ([`SchemaDocument::identity`]); a version written as a
/// JSON integer (ChainlessChain) stays an integer in the generated constants.
pub(super) fn read_identity(doc: &SchemaDocument) -> Result<Identity, CodegenError> {
    let id = doc.identity()?;
    let block = match id.source {
        Some(IdentitySource::Agentwire) => doc.value().get(AGENTWIRE_IDENTITY),
        Some(IdentitySource::ChainlessChain) => doc.value().get(CHAINLESSCHAIN_IDENTITY),
        _ => None,
    };
    let version = |v: Option<&WireVersion>, key: &str| {
        let v = v?;
        let numeric = block.and_then(|b| b.get(key)).is_some_and(Value::is_number);
        Some(match v.as_str().parse::<i64>() {
            Ok(i) if numeric => Version::Integer(i),
            _ => Version::Text(v.as_str().to_owned()),
        })
    };
    Ok(Identity {
        name: id.name.clone(),
        version: version(id.version.as_ref(), "version"),
        min_version: version(
            id.minimum_compatible_version.as_ref(),
            "minimumCompatibleVersion",
        ),
        features: id.features.clone(),
    })
}

pub(super) fn collect_names(doc: &SchemaDocument) -> (Vec<String>, Vec<String>) {
    let mut methods = Vec::new();
    let mut events = Vec::new();
    if let Some(Value::Object(map)) = doc.value().get("methods") {
        methods.extend(map.keys().cloned());
    }
    let mut event_types = Vec::new();
    agentwire_schema::walk::for_each_subschema(doc.value(), |at, schema| {
        if let Some(props) = schema.get("properties").and_then(Value::as_object) {
            if let Some(values) = props.get("method").and_then(string_values) {
                methods.extend(values);
            }
            if let Some(values) = props.get("event").and_then(string_values) {
                events.extend(values);
            }
        }
        let defs_prefix = format!("/{}/", doc.definitions_keyword());
        if let Some(name) = at.strip_prefix(&defs_prefix)
            && !name.contains('/')
            && name.ends_with("EventType")
            && let Some(values) = string_values(schema)
        {
            event_types.extend(values);
        }
    });
    events.extend(event_types);
    (dedup(methods), dedup(events))
}
