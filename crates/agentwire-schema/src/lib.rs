//! Protocol schema documents: strict JSON input, loading with `$ref` resolution, canonical text
//! and digest, validation, lint and draft export.
//!
//! The entry point is [`SchemaDocument`]: load one from bytes, a file or a parsed value, then ask
//! it for its definitions, its canonical text or a validator.

pub mod canonical;
pub mod document;
pub mod fast;
pub mod json;
pub mod pointer;
pub mod validate;
pub mod walk;

pub use canonical::{canonical_text, digest, Digest};
pub use document::{Draft, LoadOptions, RefSite, SchemaDocument, SchemaError, SchemaErrorKind};
pub use json::{parse_json, JsonError, JsonErrorKind, MAX_JSON_DEPTH};
pub use validate::{Issue, IssueCode, Validator, ValidatorCompiler};
