//! What the test modules share: documents from values, the files under `tests/data/`, and
//! validation issues as comparable tuples.

use std::path::PathBuf;

use agentwire_schema::{SchemaDocument, Validator};
use serde_json::Value;

/// `(instance pointer, schema pointer, code, message)` of one issue.
pub(crate) type IssueRow = (String, String, &'static str, String);

/// A document loaded from a value the test wrote.
pub(crate) fn doc(v: Value) -> SchemaDocument {
    SchemaDocument::from_value(v).unwrap()
}

/// A file or folder under the crate's `tests/data/`.
pub(crate) fn data_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(relative)
}

/// The multi-version test document `tests/data/versions/staged-runtime.json`.
pub(crate) fn staged_runtime() -> SchemaDocument {
    SchemaDocument::open(data_path("versions/staged-runtime.json")).expect("staged-runtime loads")
}

/// Every issue of `instance`, after checking that the verdict agrees with the report.
pub(crate) fn issues(validator: &Validator, instance: &Value) -> Vec<IssueRow> {
    let found = validator.validate(instance);
    assert_eq!(
        validator.is_valid(instance),
        found.is_empty(),
        "is_valid disagrees with validate for {instance}: {found:?}"
    );
    found
        .into_iter()
        .map(|i| {
            (
                i.instance_pointer,
                i.schema_pointer,
                i.code.code(),
                i.message,
            )
        })
        .collect()
}

/// One expected issue.
pub(crate) fn one(p: &str, s: &str, code: &'static str, m: &str) -> IssueRow {
    (p.to_owned(), s.to_owned(), code, m.to_owned())
}
