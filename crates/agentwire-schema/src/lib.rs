//! Protocol schema documents: strict JSON input, loading with `$ref` resolution, canonical text
//! and digest, validation, lint and draft export.
//!
//! The entry point is [`SchemaDocument`]: load one from bytes, a file or a parsed value, then ask
//! it for its definitions, its canonical text or a validator.

pub mod canonical;
pub mod compat;
pub mod document;
pub mod export;
pub mod fast;
pub mod identity;
pub mod json;
pub mod lint;
pub mod pointer;
pub mod project;
pub mod validate;
pub mod versions;
pub mod walk;

pub use canonical::{Digest, canonical_text, digest};
pub use compat::{
    Change, ChangeClass, CompatOptions, CompatReport, Direction, Rule, compat, compat_with,
};
pub use document::{Draft, LoadOptions, RefSite, SchemaDocument, SchemaError, SchemaErrorKind};
pub use export::{ExportError, ExportErrorKind, export};
pub use identity::{IdentityError, IdentityErrorKind, IdentitySource, ProtocolIdentity};
pub use json::{JsonError, JsonErrorKind, MAX_JSON_DEPTH, StrictValue, parse_json};
pub use lint::{Finding, LintCode, LintSummary, Severity, lint, lint_value};
pub use project::{ProjectError, ProjectErrorKind, ProjectTarget, Projector, project};
pub use validate::{Issue, IssueCode, Validator, ValidatorCompiler};
pub use versions::{VersionError, VersionErrorKind, VersionRange, WireVersion, export_version};
