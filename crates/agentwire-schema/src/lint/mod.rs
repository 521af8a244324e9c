//! Lint: findings about a schema document, each with a stable `AWnnn` code, a severity fixed by
//! the code, the JSON Pointer of the culprit and a sentence a person understands.
//!
//! Lint works on documents that do not load (see [`lint_value`]): it reports every unresolved
//! reference, not only the first one the loader stops at. The table of codes is
//! [`LintCode::ALL`] and `docs/lint.md`.
//!
//! `finding` holds the report's vocabulary (codes, severities, findings), `linter` the walk
//! that applies every rule to a document.

mod finding;
mod linter;

use serde_json::Value;

use crate::document::{Draft, LoadOptions, SchemaDocument, SchemaErrorKind};
use crate::walk;

pub use finding::{Finding, LintCode, LintSummary, Severity};
use linter::Linter;
pub use linter::REGISTRY_UNREFERENCED_PERCENT;

/// How the unreachable-definition rule treats definitions no reference reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DefinitionRoots {
    /// Decide per document: a document where more than half of the definitions are unreferenced
    /// is a registry (one `AW051` info); otherwise each unreferenced definition is an `AW050`.
    #[default]
    Auto,
    /// Definitions exist to serve the root schema: report each unreferenced one (`AW050`).
    Rooted,
    /// Definitions are entry points addressed by name: report none.
    Registry,
}

/// Options of [`lint_value_with`].
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LintOptions {
    /// How the document is read (the draft assumed when `$schema` is absent).
    pub load: LoadOptions,
    /// How unreferenced definitions are reported.
    pub definitions: DefinitionRoots,
}

/// Lints a loaded document.
pub fn lint(doc: &SchemaDocument) -> Vec<Finding> {
    lint_document(doc, DefinitionRoots::default())
}

/// Lints a loaded document with a choice of how unreferenced definitions are reported.
pub fn lint_document(doc: &SchemaDocument, definitions: DefinitionRoots) -> Vec<Finding> {
    // A loaded document has no reference cycle and its `$schema` is known.
    Linter::new(doc.value(), Some(doc.draft()), doc.id(), definitions).run()
}

/// Lints a parsed value that may not load as a document, with the default options.
pub fn lint_value(value: &Value) -> Vec<Finding> {
    lint_value_with(value, LintOptions::default())
}

/// Lints a parsed value that may not load as a document.
pub fn lint_value_with(value: &Value, options: LintOptions) -> Vec<Finding> {
    let mut findings = Vec::new();
    if !walk::is_schema(value) {
        findings.push(Finding::new(
            LintCode::MalformedKeyword,
            "",
            "a schema document must be an object or a boolean".to_owned(),
        ));
        return findings;
    }
    let draft = match value.get("$schema") {
        None => Some(options.load.default_draft),
        Some(Value::String(uri)) => {
            let draft = Draft::from_uri(uri);
            if draft.is_none() {
                findings.push(Finding::new(
                    LintCode::UnknownDraft,
                    "/$schema",
                    format!(
                        "unknown dialect {uri:?}; supported: {} and {}",
                        Draft::Draft07.uri(),
                        Draft::Draft202012.uri()
                    ),
                ));
            }
            draft
        }
        Some(_) => {
            findings.push(Finding::new(
                LintCode::MalformedKeyword,
                "/$schema",
                "$schema must be a string".to_owned(),
            ));
            None
        }
    };
    let id = value.get("$id").and_then(Value::as_str);
    findings.extend(Linter::new(value, draft, id, options.definitions).run());
    let refs_ok = !findings.iter().any(|f| {
        matches!(f.code, LintCode::UnresolvedRef | LintCode::ExternalRef)
            || (f.code == LintCode::MalformedKeyword && f.pointer.ends_with("/$ref"))
    });
    if refs_ok && let Some(draft) = draft {
        // Cycle detection is the loader's; it only runs once every reference resolves. Whatever
        // else still stops the loader is reported too, so that a document without error
        // findings always loads.
        let load = LoadOptions {
            default_draft: draft,
        };
        if let Err(err) = SchemaDocument::from_value_with(value.clone(), load) {
            let code = match err.kind {
                SchemaErrorKind::RefCycle => Some(LintCode::RefCycle),
                SchemaErrorKind::UnresolvedRef => Some(LintCode::UnresolvedRef),
                SchemaErrorKind::UnsupportedRef => Some(LintCode::ExternalRef),
                SchemaErrorKind::InvalidSchema => Some(LintCode::MalformedKeyword),
                _ => None,
            };
            // The walk may have found the same problem already (a `multipleOf` of 0, say).
            if let Some(code) = code
                && !findings
                    .iter()
                    .any(|f| f.code == code && f.pointer == err.pointer)
            {
                findings.push(Finding::new(code, err.pointer, err.message));
            }
        }
    }
    findings
}
