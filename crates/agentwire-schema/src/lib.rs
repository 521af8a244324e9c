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

pub use canonical::{canonical_text, digest, Digest};
pub use compat::{compat, compat_with, Change, ChangeClass, CompatOptions, CompatReport, Direction, Rule};
pub use document::{Draft, LoadOptions, RefSite, SchemaDocument, SchemaError, SchemaErrorKind};
pub use identity::{IdentityError, IdentityErrorKind, IdentitySource, ProtocolIdentity};
pub use export::{export, ExportError, ExportErrorKind};
pub use json::{parse_json, JsonError, JsonErrorKind, MAX_JSON_DEPTH};
pub use lint::{lint, lint_value, Finding, LintCode, LintSummary, Severity};
pub use project::{project, ProjectError, ProjectErrorKind, ProjectTarget, Projector};
pub use validate::{Issue, IssueCode, Validator, ValidatorCompiler};
pub use versions::{export_version, VersionError, VersionErrorKind, VersionRange, WireVersion};
