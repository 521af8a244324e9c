//! Errors of code generation, each with a stable code.

use agentwire_schema::SchemaError;

/// Why bindings could not be generated or checked.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodegenError {
    /// The schema document could not be used.
    #[error(transparent)]
    Schema(#[from] SchemaError),
    /// The identity block (`x-agentwire` / `x-cc-protocol`) is malformed.
    #[error(transparent)]
    Identity(#[from] agentwire_schema::identity::IdentityError),
    /// The document lowers to more named types than the limit.
    #[error("the schema needs more than {limit} named types")]
    TooManyTypes {
        /// The limit ([`crate::ir::MAX_TYPES`]).
        limit: usize,
    },
    /// Following references and merging `allOf` parts takes more steps than the limit.
    #[error("the schema needs more than {limit} reference and allOf steps to lower")]
    TooComplex {
        /// The limit ([`crate::ir::MAX_VIEW_STEPS`]).
        limit: usize,
    },
    /// Schema nodes nest deeper than the limit.
    #[error("schema nesting at {pointer:?} is deeper than {limit}")]
    TooDeep {
        /// Where.
        pointer: String,
        /// The limit ([`crate::ir::MAX_LOWERING_DEPTH`]).
        limit: usize,
    },
    /// A version given in the options differs from the one the schema's identity block states.
    #[error("the schema's {field} is {schema:?}, not {given:?}")]
    IdentityConflict {
        /// `version` or `minimum version`.
        field: &'static str,
        /// What the schema says.
        schema: String,
        /// What was given.
        given: String,
    },
    /// `--all-versions` met a keyword override that one type cannot carry for every version.
    #[error("{pointer}: {message}")]
    VersionMerge {
        /// Where, as a JSON Pointer into the document.
        pointer: String,
        /// What the override changes.
        message: String,
    },
    /// An entry of `--rust-types` names no type or property of the schema, or a property whose
    /// type is not a string.
    #[error("--rust-types entry {key:?}: {message}")]
    RustType {
        /// The entry's key.
        key: String,
        /// Why it cannot apply.
        message: String,
    },
    /// `--all-versions` was asked for a language other than Rust.
    #[error("--all-versions generates Rust only, not {0}")]
    AllVersionsLanguage(&'static str),
    /// A language name that is not one of rust, ts, py, kt, swift.
    #[error("unknown language {0:?}; expected rust, ts, py, kt or swift")]
    UnknownLanguage(String),
    /// Reading or writing a generated file failed.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: String,
        /// What failed.
        source: std::io::Error,
    },
}

impl CodegenError {
    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            CodegenError::Schema(e) => e.code(),
            CodegenError::Identity(e) => e.code(),
            CodegenError::TooManyTypes { .. } => "codegen.too-many-types",
            CodegenError::TooComplex { .. } => "codegen.too-complex",
            CodegenError::TooDeep { .. } => "codegen.too-deep",
            CodegenError::IdentityConflict { .. } => "codegen.identity-conflict",
            CodegenError::VersionMerge { .. } => "codegen.version-merge",
            CodegenError::RustType { .. } => "codegen.rust-type",
            CodegenError::AllVersionsLanguage(_) => "codegen.all-versions-language",
            CodegenError::UnknownLanguage(_) => "codegen.unknown-language",
            CodegenError::Io { .. } => "codegen.io",
        }
    }
}
