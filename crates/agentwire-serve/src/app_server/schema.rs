//! Our schema of the App Server surface (`protocols/chainlesschain-app-server/`), compiled once:
//! every request's params are checked with the compiled fast path before the face acts on them;
//! the reference validator says what is wrong only when they fail.

use std::sync::OnceLock;

use agentwire_schema::fast::{FastSchema, Target};
use agentwire_schema::{SchemaDocument, ValidatorCompiler};
use serde_json::Value;

/// The schema's text.
pub const SCHEMA_TEXT: &str =
    include_str!("../../../../protocols/chainlesschain-app-server/app-server.schema.json");

/// Issues quoted in an invalid-params answer.
const MAX_REPORTED_ISSUES: usize = 8;

/// The definition of each method's params.
const PARAMS: &[(&str, &str)] = &[
    ("initialize", "InitializeParams"),
    ("thread/start", "ThreadStartParams"),
    ("thread/resume", "ThreadResumeParams"),
    ("thread/fork", "ThreadForkParams"),
    ("thread/read", "ThreadReadParams"),
    ("thread/list", "ThreadListParams"),
    ("thread/archive", "ThreadArchiveParams"),
    ("turn/start", "TurnStartParams"),
    ("turn/interrupt", "TurnInterruptParams"),
];

struct Compiled {
    document: SchemaDocument,
    fast: FastSchema,
}

fn compiled() -> Result<&'static Compiled, &'static str> {
    static COMPILED: OnceLock<Result<Compiled, String>> = OnceLock::new();
    COMPILED
        .get_or_init(|| {
            let document =
                SchemaDocument::from_slice(SCHEMA_TEXT.as_bytes()).map_err(|e| e.to_string())?;
            let fast = FastSchema::compile(&document).map_err(|e| e.to_string())?;
            Ok(Compiled { document, fast })
        })
        .as_ref()
        .map_err(String::as_str)
}

/// Whether `method` is one this face serves (its params have a definition).
pub fn is_served(method: &str) -> bool {
    PARAMS.iter().any(|(m, _)| *m == method)
}

/// Checks `params` of `method` against its definition: `Ok` when valid, else what is wrong
/// (at most [`MAX_REPORTED_ISSUES`] issues, each at its place in the params). A method with no
/// definition, or a schema that failed to load (a build defect its tests catch), refuses.
pub fn check_params(method: &str, params: &Value) -> Result<(), String> {
    let name = PARAMS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, def)| *def)
        .ok_or_else(|| format!("{method} has no params definition"))?;
    check(name, params)
}

/// Checks a whole message against the schema's root (the envelopes).
pub fn check_message(value: &Value) -> Result<(), String> {
    check_at(None, value)
}

/// Checks `value` against the definition `name`.
pub fn check(name: &str, value: &Value) -> Result<(), String> {
    check_at(Some(name), value)
}

fn check_at(name: Option<&str>, value: &Value) -> Result<(), String> {
    let compiled = compiled().map_err(|e| format!("the App Server schema cannot be used: {e}"))?;
    let target: Target = match name {
        Some(name) => compiled
            .fast
            .definition(name)
            .ok_or_else(|| format!("the App Server schema has no {name}"))?,
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
    let name = name.unwrap_or("the schema");
    let mut text: Vec<String> = issues
        .iter()
        .take(MAX_REPORTED_ISSUES)
        .map(|issue| {
            let at = if issue.instance_pointer.is_empty() {
                "params".to_owned()
            } else {
                format!("params{}", issue.instance_pointer)
            };
            format!("{at}: {}", issue.message)
        })
        .collect();
    if text.is_empty() {
        text.push(format!("does not match {name}"));
    }
    Err(text.join("; "))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_schema_compiles_and_every_served_method_has_its_params() {
        assert!(compiled().is_ok());
        for (method, def) in PARAMS {
            assert!(is_served(method));
            assert!(compiled().unwrap().fast.definition(def).is_some(), "{def}");
        }
        assert_eq!(check_params("thread/start", &json!({})), Ok(()));
        let bad = check_params("thread/start", &json!({"threadId": "-x"})).unwrap_err();
        assert!(bad.starts_with("params/threadId: "), "{bad}");
        assert!(check_params("turn/start", &json!({"threadId": "t"})).is_err());
        assert!(check_params("thread/rename", &json!({})).is_err());
    }
}
