//! The linter: one walk over a schema document (or a value that does not load) that applies
//! every rule and collects its findings.
//!
//! This module holds the walk: the [`Linter`], how it resolves references, and the per-schema
//! step that applies each group of rules. The rules live in the submodules by group:
//! `keywords` (unknown and other-draft keywords, malformed keyword values), `refs` (`$ref` and
//! discriminator targets), `values` (types, bounds, patterns, enums), `objects` (`required`
//! names and open objects) and `definitions` (definitions no root or registry reaches).

use std::collections::{HashMap, HashSet};

use serde_json::Value;

use crate::document::{self, Draft, RefProblem};
use crate::lint::{DefinitionRoots, Finding, LintCode};
use crate::walk;

mod definitions;
mod keywords;
mod objects;
mod refs;
#[cfg(test)]
mod tests;
mod values;

pub use definitions::REGISTRY_UNREFERENCED_PERCENT;

/// Where a reference points, or why it does not.
pub(super) enum RefTarget {
    Pointer(String),
    External,
    Unresolved(String),
}

pub(super) struct Linter<'v> {
    root: &'v Value,
    draft: Option<Draft>,
    id: Option<&'v str>,
    anchors: HashMap<String, String>,
    /// Pointers of every subschema, to tell keywords from property names.
    schemas: HashSet<String>,
    definitions: DefinitionRoots,
    findings: Vec<Finding>,
}

impl<'v> Linter<'v> {
    pub(super) fn new(
        root: &'v Value,
        draft: Option<Draft>,
        id: Option<&'v str>,
        definitions: DefinitionRoots,
    ) -> Self {
        let mut anchors = HashMap::new();
        let mut schemas = HashSet::new();
        walk::for_each_subschema(root, |at, schema| {
            schemas.insert(at.to_owned());
            if let Some(name) = document::anchor_name(schema) {
                anchors.insert(name.to_owned(), at.to_owned());
            }
        });
        Linter {
            root,
            draft,
            id,
            anchors,
            schemas,
            definitions,
            findings: Vec::new(),
        }
    }

    fn push(&mut self, code: LintCode, at: impl Into<String>, message: String) {
        self.findings.push(Finding::new(code, at, message));
    }

    pub(super) fn run(mut self) -> Vec<Finding> {
        let root = self.root;
        walk::for_each_subschema(root, |at, schema| self.check_schema(at, schema));
        self.check_definitions();
        self.findings
    }

    fn resolve(&self, reference: &str) -> RefTarget {
        match document::resolve_reference(self.root, self.id, &self.anchors, reference) {
            Ok(target) => RefTarget::Pointer(target),
            Err(RefProblem::External) => RefTarget::External,
            Err(problem) => RefTarget::Unresolved(problem.describe()),
        }
    }

    fn check_schema(&mut self, at: &str, schema: &Value) {
        let map = match schema {
            Value::Object(map) => map,
            Value::Bool(_) => return,
            other => {
                self.push(
                    LintCode::MalformedKeyword,
                    at,
                    format!(
                        "a schema must be an object or a boolean, not {}",
                        kind_of(other)
                    ),
                );
                return;
            }
        };
        self.check_keywords(at, map);
        self.check_shapes(at, map);
        self.check_ref(at, map);
        self.check_discriminator(at, map);
        self.check_type(at, map);
        self.check_bounds(at, map);
        self.check_patterns(at, map);
        self.check_enum(at, map);
        self.check_required(at, map);
        self.check_open_object(at, map);
    }
}

pub(super) fn kind_of(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A non-negative integer, written as an integer or as a float with no fraction (`2.0`).
pub(super) fn count(value: &Value) -> Option<u64> {
    if let Some(n) = value.as_u64() {
        return Some(n);
    }
    let f = value.as_f64()?;
    // u64::MAX as f64 rounds up to 2^64, which does not fit.
    (f >= 0.0 && f.fract() == 0.0 && f < u64::MAX as f64).then_some(f as u64)
}
