//! A face's own schema, compiled once: values are checked with the compiled fast path, and the
//! reference validator says what is wrong only when they fail. Shared by the faces that check
//! what hosts send against the schema of their surface.

use std::sync::OnceLock;

use agentwire_schema::fast::{FastSchema, Target};
use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use serde_json::Value;

/// Issues quoted when a value fails.
const MAX_REPORTED_ISSUES: usize = 8;

/// A schema's text, compiled on first use.
pub(crate) struct CheckedSchema {
    /// What error texts call it ("the App Server schema").
    label: &'static str,
    text: &'static str,
    compiled: OnceLock<Result<Compiled, String>>,
}

struct Compiled {
    document: SchemaDocument,
    fast: FastSchema,
}

impl CheckedSchema {
    /// The schema of `text`, called `label` in errors.
    pub(crate) const fn new(label: &'static str, text: &'static str) -> Self {
        CheckedSchema {
            label,
            text,
            compiled: OnceLock::new(),
        }
    }

    fn compiled(&self) -> Result<&Compiled, String> {
        self.compiled
            .get_or_init(|| {
                let document =
                    SchemaDocument::from_slice(self.text.as_bytes()).map_err(|e| e.to_string())?;
                let fast = FastSchema::compile(&document).map_err(|e| e.to_string())?;
                Ok(Compiled { document, fast })
            })
            .as_ref()
            .map_err(|e| format!("{} cannot be used: {e}", self.label))
    }

    /// Whether the schema has the definition `name` (and compiles).
    #[cfg(test)]
    pub(crate) fn has(&self, name: &str) -> bool {
        self.compiled()
            .is_ok_and(|c| c.fast.definition(name).is_some())
    }

    /// Checks `value` against the definition `name` (the root when `None`): `Ok` when valid,
    /// else what is wrong, each issue at its place after `root` (what the value is called, such
    /// as "params"). A missing definition or a schema that does not compile (a build defect its
    /// tests catch) refuses.
    pub(crate) fn check(
        &self,
        name: Option<&str>,
        value: &Value,
        root: &str,
    ) -> Result<(), String> {
        let compiled = self.compiled()?;
        let target: Target = match name {
            Some(name) => compiled
                .fast
                .definition(name)
                .ok_or_else(|| format!("{} has no {name}", self.label))?,
            None => compiled.fast.root(),
        };
        if compiled.fast.is_valid(target, value) {
            return Ok(());
        }
        let issues = ValidatorCompiler::new(&compiled.document)
            .and_then(|c| match name {
                Some(name) => c.definition(name),
                None => c.root(),
            })
            .map(|validator| validator.validate(value))
            .unwrap_or_default();
        let mut text: Vec<String> = issues
            .iter()
            .take(MAX_REPORTED_ISSUES)
            .map(|issue| format!("{root}{}: {}", issue.instance_pointer, issue.message))
            .collect();
        if text.is_empty() {
            text.push(format!("does not match {}", name.unwrap_or("the schema")));
        }
        Err(text.join("; "))
    }
}
