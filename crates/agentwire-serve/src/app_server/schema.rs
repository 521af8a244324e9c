//! Our schema of the App Server surface (`protocols/chainlesschain-app-server/`), compiled once:
//! every request's params are checked with the compiled fast path before the face acts on them;
//! the reference validator says what is wrong only when they fail.

use serde_json::Value;

use crate::checked::CheckedSchema;

/// The schema's text.
pub const SCHEMA_TEXT: &str =
    include_str!("../../../../protocols/chainlesschain-app-server/app-server.schema.json");

static SCHEMA: CheckedSchema = CheckedSchema::new("the App Server schema", SCHEMA_TEXT);

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

/// Whether `method` is one this face serves (its params have a definition).
pub fn is_served(method: &str) -> bool {
    PARAMS.iter().any(|(m, _)| *m == method)
}

/// Checks `params` of `method` against its definition: `Ok` when valid, else what is wrong
/// (at most eight issues, each at its place in the params). A method with no
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
    SCHEMA.check(name, value, "params")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_schema_compiles_and_every_served_method_has_its_params() {
        for (method, def) in PARAMS {
            assert!(is_served(method));
            assert!(SCHEMA.has(def), "{def}");
        }
        assert_eq!(check_params("thread/start", &json!({})), Ok(()));
        let bad = check_params("thread/start", &json!({"threadId": "-x"})).unwrap_err();
        assert!(bad.starts_with("params/threadId: "), "{bad}");
        assert!(check_params("turn/start", &json!({"threadId": "t"})).is_err());
        assert!(check_params("thread/rename", &json!({})).is_err());
    }
}
