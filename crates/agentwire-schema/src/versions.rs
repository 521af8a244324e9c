//! Wire versions inside one schema document: version numbers, the `x-agentwire-since`/`until`
//! ranges, keyword overrides and enum-value ranges (docs/versions.md), and the per-version
//! view that builds the strict schema of exactly one version.

use std::cmp::Ordering;
use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::document::SchemaDocument;
use crate::pointer;
use crate::walk::{ARRAY_SUBSCHEMA_KEYWORDS, MAP_SUBSCHEMA_KEYWORDS, SINGLE_SUBSCHEMA_KEYWORDS};

/// Most dot-separated parts a version may have.
pub const MAX_VERSION_PARTS: usize = 8;
/// Most digits in one part of a version (keeps every part inside `u32`).
pub const MAX_VERSION_PART_DIGITS: usize = 9;
/// Most passes the view makes to settle which definitions vanish because everything they
/// reference vanished; each pass removes at least one definition, so a document needs at most
/// one pass per definition plus one.
pub const MAX_VIEW_PASSES: usize = 4096;

/// The annotation prefix every version and direction keyword shares.
pub const ANNOTATION_PREFIX: &str = "x-agentwire";
/// `x-agentwire-since`: first version a node exists in.
pub const SINCE: &str = "x-agentwire-since";
/// `x-agentwire-until`: first version a node no longer exists in.
pub const UNTIL: &str = "x-agentwire-until";
/// `x-agentwire-enum-since`: per-value `since` of an `enum`.
pub const ENUM_SINCE: &str = "x-agentwire-enum-since";
/// `x-agentwire-enum-until`: per-value `until` of an `enum`.
pub const ENUM_UNTIL: &str = "x-agentwire-enum-until";
/// `x-agentwire-versions`: keyword overrides for version ranges.
pub const OVERRIDES: &str = "x-agentwire-versions";
/// `x-agentwire-version-const`: the string is the version itself.
pub const VERSION_CONST: &str = "x-agentwire-version-const";
/// `x-agentwire-map-down`: how a value maps to older versions.
pub const MAP_DOWN: &str = "x-agentwire-map-down";

/// A wire version: dotted decimal parts compared numerically, `1.10 > 1.9`, `1 == 1.0`.
#[derive(Debug, Clone)]
pub struct WireVersion {
    text: String,
    parts: Vec<u32>,
}

impl WireVersion {
    /// Parses `"1"`, `"1.2"`, `"2026.7"`: dot-separated decimal numbers without leading zeros.
    pub fn parse(text: &str) -> Result<WireVersion, VersionError> {
        let malformed = |why: &str| {
            VersionError::new(
                VersionErrorKind::Malformed,
                "",
                format!("{text:?} is not a version ({why}); expected dotted numbers like \"1.2\""),
            )
        };
        if text.is_empty() {
            return Err(malformed("empty"));
        }
        let mut parts = Vec::new();
        for part in text.split('.') {
            if parts.len() == MAX_VERSION_PARTS {
                return Err(malformed("too many parts"));
            }
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(malformed("each part must be decimal digits"));
            }
            if part.len() > MAX_VERSION_PART_DIGITS {
                return Err(malformed("a part is too long"));
            }
            if part.len() > 1 && part.starts_with('0') {
                return Err(malformed("leading zero"));
            }
            parts.push(
                part.parse::<u32>()
                    .map_err(|_| malformed("a part is too large"))?,
            );
        }
        Ok(WireVersion {
            text: text.to_owned(),
            parts,
        })
    }

    /// Reads a version written as a string or as a non-negative integer (ChainlessChain).
    pub fn from_json(value: &Value) -> Result<WireVersion, VersionError> {
        match value {
            Value::String(s) => WireVersion::parse(s),
            Value::Number(n) if n.as_u64().is_some() => WireVersion::parse(&n.to_string()),
            other => Err(VersionError::new(
                VersionErrorKind::Malformed,
                "",
                format!("a version must be a string or a non-negative integer, not {other}"),
            )),
        }
    }

    /// The version as written.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    fn significant(&self) -> &[u32] {
        let end = self
            .parts
            .iter()
            .rposition(|p| *p != 0)
            .map_or(0, |i| i + 1);
        &self.parts[..end]
    }
}

impl PartialEq for WireVersion {
    fn eq(&self, other: &Self) -> bool {
        self.significant() == other.significant()
    }
}

impl Eq for WireVersion {}

impl PartialOrd for WireVersion {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for WireVersion {
    fn cmp(&self, other: &Self) -> Ordering {
        self.significant().cmp(other.significant())
    }
}

impl fmt::Display for WireVersion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

/// What is wrong with a version, an annotation or a per-version view.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum VersionErrorKind {
    /// A version string that is not dotted decimal numbers.
    Malformed,
    /// A version the document does not carry.
    UnknownVersion,
    /// A version annotation with the wrong shape.
    BadAnnotation,
    /// The view keeps a `$ref` whose target did not survive (it points into something removed).
    BrokenReference,
    /// The view does not validate against its metaschema.
    Metaschema,
    /// The document's identity block is malformed.
    Identity,
}

impl VersionErrorKind {
    /// Stable code of the error.
    pub fn code(self) -> &'static str {
        match self {
            VersionErrorKind::Malformed => "version.malformed",
            VersionErrorKind::UnknownVersion => "version.unknown",
            VersionErrorKind::BadAnnotation => "version.bad-annotation",
            VersionErrorKind::BrokenReference => "version.broken-reference",
            VersionErrorKind::Metaschema => "version.metaschema",
            VersionErrorKind::Identity => "version.identity",
        }
    }
}

/// A version problem, with the JSON Pointer of the culprit in the schema document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VersionError {
    /// What went wrong.
    pub kind: VersionErrorKind,
    /// JSON Pointer into the schema document (empty when not about one place).
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl VersionError {
    pub(crate) fn new(kind: VersionErrorKind, pointer: impl Into<String>, message: String) -> Self {
        VersionError {
            kind,
            pointer: pointer.into(),
            message,
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for VersionError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}: {}", self.code(), self.message)
        } else {
            write!(f, "{} at {}: {}", self.code(), self.pointer, self.message)
        }
    }
}

impl std::error::Error for VersionError {}

/// A half-open version range `[since, until)`; a missing end is unbounded.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct VersionRange {
    /// First version included.
    pub since: Option<WireVersion>,
    /// First version excluded.
    pub until: Option<WireVersion>,
}

impl VersionRange {
    /// Whether `version` lies in the range.
    pub fn contains(&self, version: &WireVersion) -> bool {
        self.since.as_ref().is_none_or(|s| s <= version)
            && self.until.as_ref().is_none_or(|u| version < u)
    }

    /// The range a schema node declares with `x-agentwire-since`/`until` (unbounded if none).
    pub fn of_node(node: &Value) -> Result<VersionRange, VersionError> {
        let Value::Object(map) = node else {
            return Ok(VersionRange::default());
        };
        range_from(map, SINCE, UNTIL, "")
    }
}

fn range_from(
    map: &Map<String, Value>,
    since_key: &str,
    until_key: &str,
    at: &str,
) -> Result<VersionRange, VersionError> {
    let read = |key: &str| -> Result<Option<WireVersion>, VersionError> {
        match map.get(key) {
            None => Ok(None),
            Some(v) => WireVersion::from_json(v).map(Some).map_err(|e| {
                VersionError::new(
                    VersionErrorKind::BadAnnotation,
                    pointer::push(at, key),
                    e.message,
                )
            }),
        }
    };
    Ok(VersionRange {
        since: read(since_key)?,
        until: read(until_key)?,
    })
}

/// Whether a schema node exists in `version` according to its own `since`/`until`.
pub fn node_in_version(node: &Value, version: &WireVersion) -> Result<bool, VersionError> {
    Ok(VersionRange::of_node(node)?.contains(version))
}

/// Whether enum value `value` of the node exists in `version` (per `x-agentwire-enum-since` /
/// `x-agentwire-enum-until`; values without an entry exist whenever the node does).
pub fn enum_value_in_version(
    node: &Value,
    value: &Value,
    version: &WireVersion,
) -> Result<bool, VersionError> {
    let Value::Object(map) = node else {
        return Ok(true);
    };
    enum_value_in(map, value, version, "")
}

/// [`enum_value_in_version`] for a schema object already at hand.
pub fn enum_value_in_map(
    map: &Map<String, Value>,
    value: &Value,
    version: &WireVersion,
) -> Result<bool, VersionError> {
    enum_value_in(map, value, version, "")
}

fn enum_value_in(
    map: &Map<String, Value>,
    value: &Value,
    version: &WireVersion,
    at: &str,
) -> Result<bool, VersionError> {
    let Value::String(text) = value else {
        return Ok(true);
    };
    for (key, keep_if_at_least) in [(ENUM_SINCE, true), (ENUM_UNTIL, false)] {
        let Some(table) = map.get(key) else { continue };
        let Value::Object(table) = table else {
            return Err(VersionError::new(
                VersionErrorKind::BadAnnotation,
                pointer::push(at, key),
                format!("{key} must map enum values to versions"),
            ));
        };
        if let Some(bound) = table.get(text) {
            let bound = WireVersion::from_json(bound).map_err(|e| {
                VersionError::new(
                    VersionErrorKind::BadAnnotation,
                    pointer::push(&pointer::push(at, key), text),
                    e.message,
                )
            })?;
            let ok = if keep_if_at_least {
                *version >= bound
            } else {
                *version < bound
            };
            if !ok {
                return Ok(false);
            }
        }
    }
    Ok(true)
}

/// Builds the strict schema of exactly `version` from an annotated document: nodes out of range
/// removed, overrides applied, version constants fixed, and every `x-agentwire*` annotation
/// stripped. The result loads as a [`SchemaDocument`] and validates against its metaschema.
pub fn export_version(doc: &SchemaDocument, version: &str) -> Result<Value, VersionError> {
    let version = known_version(doc, version)?;
    let view = view(doc, &version, ViewMode::Strict)?;
    check_export(&view)?;
    Ok(view)
}

/// Checks that an exported view is a usable schema: every `$ref` resolves and the document
/// validates against its metaschema.
pub(crate) fn check_export(view: &Value) -> Result<(), VersionError> {
    SchemaDocument::from_value(view.clone()).map_err(|e| {
        VersionError::new(
            VersionErrorKind::BrokenReference,
            e.pointer.clone(),
            e.message,
        )
    })?;
    if let Err(err) = jsonschema::meta::validate(view) {
        return Err(VersionError::new(
            VersionErrorKind::Metaschema,
            err.instance_path().to_string(),
            format!("the view does not validate against its metaschema: {err}"),
        ));
    }
    Ok(())
}

/// Looks `version` up in the versions the document declares.
pub fn known_version(doc: &SchemaDocument, version: &str) -> Result<WireVersion, VersionError> {
    let wanted = WireVersion::parse(version)?;
    let identity = doc
        .identity()
        .map_err(|e| VersionError::new(VersionErrorKind::Identity, e.pointer.clone(), e.message))?;
    match identity.versions.iter().find(|v| **v == wanted) {
        Some(v) => Ok(v.clone()),
        None => {
            let known: Vec<&str> = identity.versions.iter().map(WireVersion::as_str).collect();
            Err(VersionError::new(
                VersionErrorKind::UnknownVersion,
                "",
                if known.is_empty() {
                    format!("the document declares no versions, so it has no view {version:?}")
                } else {
                    format!(
                        "version {version:?} is not one of the document's versions: {}",
                        known.join(", ")
                    )
                },
            ))
        }
    }
}

/// What a view keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum ViewMode {
    /// The export: every annotation stripped.
    Strict,
    /// For projection and comparison: overrides applied, but the range, map-down, direction and
    /// openness annotations kept so later steps can read them.
    Annotated,
}

/// Builds the view of one version (see [`export_version`]).
pub(crate) fn view(
    doc: &SchemaDocument,
    version: &WireVersion,
    mode: ViewMode,
) -> Result<Value, VersionError> {
    view_traced(doc, version, mode, false).map(|(value, _)| value)
}

/// Where each node of a view came from: view pointer → pointer in the annotated document.
pub(crate) type ViewTrace = HashMap<String, String>;

/// Builds a view, and when `trace` is set also the origin of each of its nodes.
pub(crate) fn view_traced(
    doc: &SchemaDocument,
    version: &WireVersion,
    mode: ViewMode,
    trace: bool,
) -> Result<(Value, ViewTrace), VersionError> {
    let mut absent: HashSet<String> = HashSet::new();
    for _ in 0..MAX_VIEW_PASSES {
        let mut viewer = Viewer {
            doc,
            version,
            mode,
            absent: &absent,
            vanished: Vec::new(),
            trace: trace.then(HashMap::new),
        };
        let out = viewer.node(doc.value(), "", "")?;
        let vanished = std::mem::take(&mut viewer.vanished);
        let trace_out = viewer.trace.take();
        let before = absent.len();
        absent.extend(vanished);
        if absent.len() == before {
            let value = out.unwrap_or(Value::Bool(false));
            return Ok((value, trace_out.unwrap_or_default()));
        }
    }
    Err(VersionError::new(
        VersionErrorKind::BadAnnotation,
        "",
        format!("the view of {version} did not settle after {MAX_VIEW_PASSES} passes"),
    ))
}

struct Viewer<'a> {
    doc: &'a SchemaDocument,
    version: &'a WireVersion,
    mode: ViewMode,
    /// Pointers (in document coordinates) of definitions known to be absent from the view.
    absent: &'a HashSet<String>,
    /// Definitions found absent during this pass.
    vanished: Vec<String>,
    /// View pointer → document pointer of every node kept, when asked for.
    trace: Option<ViewTrace>,
}

impl Viewer<'_> {
    /// The view of the node at `at`, or `None` when it does not exist in the version.
    /// `at` is the node's pointer in the document, `view_at` where it lands in the view.
    fn node(
        &mut self,
        node: &Value,
        at: &str,
        view_at: &str,
    ) -> Result<Option<Value>, VersionError> {
        let Value::Object(source) = node else {
            return Ok(Some(node.clone()));
        };
        if !range_from(source, SINCE, UNTIL, at)?.contains(self.version) {
            return Ok(None);
        }
        let mut map = source.clone();
        self.apply_overrides(&mut map, at)?;
        if let Some(Value::String(reference)) = map.get("$ref") {
            let (target, _) = self.doc.resolve_ref(at, reference).map_err(|e| {
                VersionError::new(VersionErrorKind::BrokenReference, e.pointer, e.message)
            })?;
            if self.absent.contains(&target) {
                return Ok(None);
            }
        }
        if map.get(VERSION_CONST) == Some(&Value::Bool(true)) {
            for key in ["enum", "pattern", "format", "minLength", "maxLength"] {
                map.shift_remove(key);
            }
            map.insert(
                "const".to_owned(),
                Value::String(self.version.as_str().to_owned()),
            );
        }
        if let Some(Value::Array(values)) = map.get("enum") {
            let mut kept = Vec::with_capacity(values.len());
            for value in values {
                if enum_value_in(&map, value, self.version, at)? {
                    kept.push(value.clone());
                }
            }
            if kept.is_empty() && !values.is_empty() {
                return Ok(None);
            }
            map.insert("enum".to_owned(), Value::Array(kept));
        }
        let mut removed_properties: Vec<String> = Vec::new();
        let keys: Vec<String> = map.keys().cloned().collect();
        for key in keys {
            let key = key.as_str();
            let here = pointer::push(at, key);
            let view_here = pointer::push(view_at, key);
            if SINGLE_SUBSCHEMA_KEYWORDS.contains(&key) {
                let Some(child) = map.get(key).cloned() else {
                    continue;
                };
                let viewed = self
                    .node(&child, &here, &view_here)?
                    .unwrap_or(Value::Bool(false));
                map.insert(key.to_owned(), viewed);
            } else if ARRAY_SUBSCHEMA_KEYWORDS.contains(&key)
                || (key == "items" && map.get(key).is_some_and(Value::is_array))
            {
                let Some(Value::Array(items)) = map.get(key).cloned() else {
                    continue;
                };
                let mut kept = Vec::with_capacity(items.len());
                for (i, item) in items.iter().enumerate() {
                    let view_item = format!("{view_here}/{}", kept.len());
                    match self.node(item, &format!("{here}/{i}"), &view_item)? {
                        Some(v) => kept.push(v),
                        None if key == "prefixItems" || key == "items" => {
                            kept.push(Value::Bool(false))
                        }
                        None => {}
                    }
                }
                match key {
                    "oneOf" | "anyOf" if kept.is_empty() => return Ok(None),
                    "allOf" if kept.is_empty() => {
                        map.shift_remove(key);
                    }
                    _ => {
                        map.insert(key.to_owned(), Value::Array(kept));
                    }
                }
            } else if key == "items" {
                let Some(child) = map.get(key).cloned() else {
                    continue;
                };
                let viewed = self
                    .node(&child, &here, &view_here)?
                    .unwrap_or(Value::Bool(false));
                map.insert(key.to_owned(), viewed);
            } else if MAP_SUBSCHEMA_KEYWORDS.contains(&key) || key == "dependencies" {
                let Some(Value::Object(entries)) = map.get(key).cloned() else {
                    continue;
                };
                let mut kept = Map::new();
                for (name, child) in &entries {
                    if key == "dependencies" && !child.is_object() {
                        kept.insert(name.clone(), child.clone());
                        continue;
                    }
                    let child_at = pointer::push(&here, name);
                    let view_child = pointer::push(&view_here, name);
                    match self.node(child, &child_at, &view_child)? {
                        Some(v) => {
                            kept.insert(name.clone(), v);
                        }
                        None => {
                            if key == "properties" {
                                removed_properties.push(name.clone());
                            }
                            if key == "$defs" || key == "definitions" {
                                self.vanished.push(child_at);
                            }
                        }
                    }
                }
                map.insert(key.to_owned(), Value::Object(kept));
            }
        }
        if !removed_properties.is_empty()
            && let Some(Value::Array(required)) = map.get_mut("required")
        {
            required.retain(|r| {
                !r.as_str()
                    .is_some_and(|r| removed_properties.iter().any(|p| p == r))
            });
        }
        self.strip(&mut map);
        if let Some(trace) = &mut self.trace {
            trace.insert(view_at.to_owned(), at.to_owned());
        }
        Ok(Some(Value::Object(map)))
    }

    fn apply_overrides(&self, map: &mut Map<String, Value>, at: &str) -> Result<(), VersionError> {
        let Some(overrides) = map.get(OVERRIDES).cloned() else {
            return Ok(());
        };
        let here = pointer::push(at, OVERRIDES);
        let Value::Array(entries) = overrides else {
            return Err(VersionError::new(
                VersionErrorKind::BadAnnotation,
                here,
                format!("{OVERRIDES} must be an array of {{since, until, schema}}"),
            ));
        };
        for (i, entry) in entries.iter().enumerate() {
            let entry_at = format!("{here}/{i}");
            let Value::Object(entry) = entry else {
                return Err(VersionError::new(
                    VersionErrorKind::BadAnnotation,
                    entry_at,
                    "an override must be an object {since, until, schema}".to_owned(),
                ));
            };
            if !range_from(entry, "since", "until", &entry_at)?.contains(self.version) {
                continue;
            }
            let Some(Value::Object(schema)) = entry.get("schema") else {
                return Err(VersionError::new(
                    VersionErrorKind::BadAnnotation,
                    pointer::push(&entry_at, "schema"),
                    "an override needs a \"schema\" object of keywords".to_owned(),
                ));
            };
            for (key, value) in schema {
                if key.starts_with(ANNOTATION_PREFIX) {
                    return Err(VersionError::new(
                        VersionErrorKind::BadAnnotation,
                        pointer::push(&pointer::push(&entry_at, "schema"), key),
                        format!("an override cannot change the version annotation {key}"),
                    ));
                }
                if value.is_null() {
                    map.shift_remove(key);
                } else {
                    map.insert(key.clone(), value.clone());
                }
            }
        }
        Ok(())
    }

    fn strip(&self, map: &mut Map<String, Value>) {
        match self.mode {
            ViewMode::Strict => map.retain(|k, _| !k.starts_with(ANNOTATION_PREFIX)),
            ViewMode::Annotated => {
                map.shift_remove(OVERRIDES);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn versions_compare_numerically() {
        let v = |s: &str| WireVersion::parse(s).unwrap();
        assert!(v("1.10") > v("1.9"));
        assert_eq!(v("1"), v("1.0"));
        assert!(v("2") > v("1.99"));
        assert!(v("2026.8") > v("2026.7"));
        for bad in ["", "1.", ".1", "1.02", "a", "1..2", "1234567890"] {
            assert_eq!(
                WireVersion::parse(bad).unwrap_err().kind,
                VersionErrorKind::Malformed,
                "{bad}"
            );
        }
    }

    #[test]
    fn ranges_are_half_open() {
        let r = VersionRange::of_node(&serde_json::json!({SINCE: "1.2", UNTIL: "1.4"})).unwrap();
        let v = |s: &str| WireVersion::parse(s).unwrap();
        assert!(!r.contains(&v("1.1")));
        assert!(r.contains(&v("1.2")));
        assert!(r.contains(&v("1.3")));
        assert!(!r.contains(&v("1.4")));
    }
}
