//! The compatibility checker: compares an old and a new schema document and classifies every
//! change as breaking or additive, taking into account which side receives each message
//! (`x-agentwire-direction`) and whether the receiver tolerates unknown members
//! (`x-agentwire-open`). Rules and their classes are listed in docs/compat.md.
//!
//! `rules` holds the rule table and the classification, `direction` who receives each node,
//! `compare` the walk over two documents, `baseline` the freeze policy built on a report.

mod baseline;
mod compare;
mod direction;
mod rules;

use serde_json::{Map, Value, json};

use crate::document::SchemaDocument;
use crate::identity::{AGENTWIRE_IDENTITY, IdentitySource};
use crate::pointer;
use crate::versions::{self, ViewMode, WireVersion};

use compare::{Selection, compare_documents};

pub use baseline::{FreezeDecision, freeze_decision};
pub use direction::{DIRECTION, Direction, OPEN};
pub use rules::{ChangeClass, Effect, Rule, classify};

/// Most nested comparisons (schema nesting plus followed references) before the checker gives
/// up on a branch and reports it as a breaking `comparison-too-deep` change.
pub const MAX_COMPARE_DEPTH: usize = 512;
/// Stack of the thread the comparison runs on: room for [`MAX_COMPARE_DEPTH`] nested levels.
pub const COMPARE_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Depth limit used when no comparison thread can be started and the caller's stack is used.
pub const MAX_COMPARE_DEPTH_INLINE: usize = 48;

/// One difference between two schema documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The rule that detected it.
    pub rule: Rule,
    /// JSON Pointer of the node in the new document (in the old one for removals).
    pub pointer: String,
    /// The old value (keyword value, enum value, property schema), if any.
    pub old: Option<Value>,
    /// The new value, if any.
    pub new: Option<Value>,
    /// Breaking or additive, for the node's direction.
    pub class: ChangeClass,
    /// Who receives the node the change is in.
    pub direction: Direction,
    /// The wire version whose views were compared, for multi-version documents.
    pub version: Option<String>,
}

impl Change {
    /// The change as JSON: `{rule, class, direction, pointer, old?, new?, version?}`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("rule".to_owned(), json!(self.rule.id()));
        out.insert("class".to_owned(), json!(self.class.id()));
        out.insert("direction".to_owned(), json!(self.direction.id()));
        out.insert("pointer".to_owned(), json!(self.pointer));
        if let Some(v) = &self.version {
            out.insert("version".to_owned(), json!(v));
        }
        if let Some(v) = &self.old {
            out.insert("old".to_owned(), v.clone());
        }
        if let Some(v) = &self.new {
            out.insert("new".to_owned(), v.clone());
        }
        Value::Object(out)
    }
}

/// Every change found between two documents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompatReport {
    /// The changes, root first, then definitions in the old document's order, then additions.
    pub changes: Vec<Change>,
}

impl CompatReport {
    /// True when no change is breaking.
    pub fn is_compatible(&self) -> bool {
        self.changes
            .iter()
            .all(|c| c.class == ChangeClass::Additive)
    }

    /// The breaking changes.
    pub fn breaking(&self) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(|c| c.class == ChangeClass::Breaking)
    }

    /// The report as JSON: `{compatible, breaking, additive, changes}`.
    pub fn to_json(&self) -> Value {
        let breaking = self.breaking().count();
        json!({
            "compatible": breaking == 0,
            "breaking": breaking,
            "additive": self.changes.len() - breaking,
            "changes": self.changes.iter().map(Change::to_json).collect::<Vec<_>>(),
        })
    }
}

/// How to compare: the direction of nodes no annotation reaches, and which definitions.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CompatOptions {
    /// Direction of nodes no annotation reaches. `None`: `both` when the new document has an
    /// `x-agentwire` identity block (our own documents), `unspecified` otherwise.
    pub default_direction: Option<Direction>,
    /// Compare only these definitions, and every definition they reach through a local `$ref`
    /// in either document; the root and the other definitions are left out. `None` compares
    /// the whole documents. This is how our document of a peer's protocol is held to the
    /// definitions it shares with the peer's own schema.
    pub definitions: Option<Vec<String>>,
}

/// Compares two documents with the default options.
pub fn compat(old: &SchemaDocument, new: &SchemaDocument) -> CompatReport {
    compat_with(old, new, &CompatOptions::default())
}

/// Compares two documents.
///
/// Documents that both carry several wire versions (`x-agentwire.versions`) are compared version
/// by version: the view of every old version is compared with the new document's view of the same
/// version, and an old version the new document lacks is a breaking `version-removed`.
pub fn compat_with(
    old: &SchemaDocument,
    new: &SchemaDocument,
    options: &CompatOptions,
) -> CompatReport {
    if old.value() == new.value() {
        return CompatReport::default();
    }
    // Deeply nested or long reference chains recurse deeply: run on a stack sized for the limit.
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("agentwire-compat".to_owned())
            .stack_size(COMPARE_STACK_BYTES)
            .spawn_scoped(scope, || {
                compat_on_stack(old, new, options, MAX_COMPARE_DEPTH)
            });
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(report) => report,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => compat_on_stack(old, new, options, MAX_COMPARE_DEPTH_INLINE),
        }
    })
}

fn compat_on_stack(
    old: &SchemaDocument,
    new: &SchemaDocument,
    options: &CompatOptions,
    max_depth: usize,
) -> CompatReport {
    let default = options.default_direction.unwrap_or_else(|| {
        if new.value().get(AGENTWIRE_IDENTITY).is_some() {
            Direction::Both
        } else {
            Direction::Unspecified
        }
    });
    if options.definitions.is_none()
        && let Some(report) = compat_versions(old, new, default, max_depth)
    {
        return report;
    }
    let mut report = CompatReport::default();
    compare_documents(
        old.value(),
        new.value(),
        ref_siblings(old, new),
        &Selection::new(old.value(), new.value(), options.definitions.as_deref()),
        (default, None),
        max_depth,
        &mut report.changes,
    );
    report
}

/// Version-by-version comparison, when both documents declare versions and at least one
/// carries more than one.
fn compat_versions(
    old: &SchemaDocument,
    new: &SchemaDocument,
    default: Direction,
    max_depth: usize,
) -> Option<CompatReport> {
    let old_id = old.identity().ok()?;
    let new_id = new.identity().ok()?;
    if old_id.source != Some(IdentitySource::Agentwire)
        || new_id.source != Some(IdentitySource::Agentwire)
    {
        return None;
    }
    if old_id.versions.len() < 2 && new_id.versions.len() < 2 {
        return None;
    }
    let mut report = CompatReport::default();
    for version in &old_id.versions {
        let version_text = Some(version.as_str().to_owned());
        let Some(new_version) = new_id.versions.iter().find(|v| *v == version) else {
            report.changes.push(Change {
                rule: Rule::VersionRemoved,
                pointer: pointer::from_tokens([AGENTWIRE_IDENTITY, "versions"]),
                old: Some(json!(version.as_str())),
                new: None,
                class: ChangeClass::Breaking,
                direction: default,
                version: version_text,
            });
            continue;
        };
        match (view_of(old, version), view_of(new, new_version)) {
            (Ok(o), Ok(n)) => compare_documents(
                &o,
                &n,
                ref_siblings(old, new),
                &Selection::All,
                (default, version_text),
                max_depth,
                &mut report.changes,
            ),
            // A view that cannot be built is compared as the raw document would be: fail closed.
            _ => compare_documents(
                old.value(),
                new.value(),
                ref_siblings(old, new),
                &Selection::All,
                (default, version_text),
                max_depth,
                &mut report.changes,
            ),
        }
    }
    Some(report)
}

/// Whether keywords beside a `$ref` constrain the value, in `old` and in `new`: from 2020-12 on
/// they do; draft-07 ignores them.
fn ref_siblings(old: &SchemaDocument, new: &SchemaDocument) -> (bool, bool) {
    let applies = |doc: &SchemaDocument| doc.draft() == crate::Draft::Draft202012;
    (applies(old), applies(new))
}

fn view_of(doc: &SchemaDocument, version: &WireVersion) -> Result<Value, versions::VersionError> {
    versions::view(doc, version, ViewMode::Annotated)
}

pub(super) fn definitions_of(root: &Value) -> Option<(&'static str, &Map<String, Value>)> {
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(m)) = root.get(key) {
            return Some((key, m));
        }
    }
    None
}
