//! Validating messages against a schema document: compiling the root or any named definition
//! into a [`Validator`] that answers "is this valid" fast and, when it is not, reports every
//! [`Issue`] with the instance pointer, the schema location, the keyword and a sentence.
//!
//! The keyword semantics are those of the `jsonschema` crate (draft-07 and 2020-12, refs resolved
//! at compile time, no network or file access), with these changes of our own:
//! - formats are assertions (`date-time`, `uuid`, `uri`, `email`, … are checked), in both drafts;
//! - `pattern` is an ECMA-262 regular expression compiled with the `u` flag, as the peers'
//!   JavaScript validators compile it, run in linear time where the pattern allows and under
//!   [`PATTERN_BACKTRACK_LIMIT`](crate::fast::PATTERN_BACKTRACK_LIMIT) steps where it needs
//!   backtracking (see `pattern.rs`);
//! - `multipleOf` holds when the double quotient is an integer, as AJV and Python
//!   `jsonschema` decide it (see `number.rs`);
//! - evaluation is bounded: [`MAX_EVAL_DEPTH`](crate::fast::MAX_EVAL_DEPTH) levels and a step
//!   budget ([`WALK_STEPS_BASE`](crate::fast::WALK_STEPS_BASE) plus
//!   [`WALK_STEPS_PER_VALUE`](crate::fast::WALK_STEPS_PER_VALUE) per value), each with its own
//!   issue code, and an issue reached by several paths is reported once;
//! - a failed `oneOf` / `anyOf` whose branch is chosen by a tag property (an OpenAPI
//!   `discriminator`, or a `const` / `enum` property every branch pins, see `dispatch.rs`)
//!   reports the issues of the branch the tag selects, or one issue at an unknown tag.
//!
//! Verdicts follow JSON Schema, not any one SDK. Where ChainlessChain's own validators (its
//! JavaScript `validation.mjs` and the Python copy in `chainlesschain-agent-sdk`) read a keyword
//! differently, we side with JSON Schema:
//!
//! | point | agentwire (JSON Schema) | ChainlessChain JS | ChainlessChain Python SDK |
//! |---|---|---|---|
//! | `integer` | a number with a zero fraction: `1.0` is one; no size bound | `Number.isSafeInteger` (2^53 + 1 is not one) | `int` and not `bool` (`1.0` is not one) |
//! | `const` / `enum` | JSON equality: `true` ≠ `1`, `1.0` = `1` | `JSON.stringify` equality (key order matters) | Python `==`: `true` passes `const: 1` |
//! | string length | Unicode code points | UTF-16 code units | code points (same as ours) |
//! | `pattern` | ECMA-262 with `u` (`$` ends the text) | the same | `re.search` (`$` also before a final `\n`) |
//! | `date-time` | RFC 3339 (offset required) | `Date.parse` is not NaN | `datetime.fromisoformat` (a bare date passes) |
//! | input | strict JSON: duplicate keys, `NaN` and lone surrogates are errors | `JSON.parse` (last duplicate wins) | `json.loads` (takes `NaN`, duplicates) |
//!
//! The differential test against the Python SDK (`tests/validate_chainlesschain.rs`) agrees on
//! every generated message and keeps out of exactly these cases.

mod dispatch;
mod engine_document;
mod format;
pub mod message;
pub(crate) mod number;
mod pattern;
mod walk_budget;

use std::fmt;
use std::sync::Arc;

use jsonschema::error::{TypeKind, ValidationErrorKind};
use jsonschema::{Registry, ValidationError};
use serde_json::{Value, json};

use crate::document::{Draft, SchemaDocument, SchemaError, SchemaErrorKind};
use crate::fast::{EvalLimit, FastSchema, MAX_EVAL_DEPTH, Tape, Target};
use crate::json::{self, JsonError, JsonErrorKind, MAX_JSON_DEPTH};
use crate::pointer;

use dispatch::DispatchTable;
pub use engine_document::MAX_ENGINE_REF_DEPTH;
use engine_document::{Pruning, collapse_ref_chains, fragment_escape};
pub use message::{MAX_LISTED_VALUES, MAX_PREVIEW_CHARS};
use walk_budget::WalkGraph;

/// Base URI given to a document without an absolute `$id`, so that references inside it resolve.
/// It is never fetched: validators are built offline.
pub const DOCUMENT_BASE_URI: &str = "https://agentwire.invalid/schema.json";

/// Unions with at most this many branches get a one-line summary of why each branch failed.
pub const MAX_SUMMARISED_BRANCHES: usize = 4;

/// Deepest nesting of unions whose branch issues are expanded into a report; deeper failures
/// are reported as the union's own issue.
pub const MAX_REPORT_DEPTH: usize = 64;

/// Arrays longer than this are not searched for the positions of duplicate items.
pub const MAX_DUPLICATE_SEARCH_ITEMS: usize = 1024;

/// What is wrong with a message; each variant has a stable [`code`](IssueCode::code).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum IssueCode {
    /// The bytes are not acceptable JSON (invalid UTF-8, syntax, duplicate key, too deep …).
    Json(JsonErrorKind),
    /// An NDJSON line longer than the reader's limit (reported by stream readers).
    LineTooLong,
    /// `type`.
    Type,
    /// `required` (also a missing discriminator tag).
    Required,
    /// `additionalProperties: false`: one issue per unexpected property.
    AdditionalProperty,
    /// `unevaluatedProperties: false`: one issue per unexpected property.
    UnevaluatedProperty,
    /// `additionalItems` / `items: false` after a tuple.
    AdditionalItems,
    /// `unevaluatedItems`.
    UnevaluatedItems,
    /// `const`.
    Const,
    /// `enum`.
    Enum,
    /// The tag of a discriminated union has a value no branch accepts.
    Discriminator,
    /// `oneOf`: no branch matches.
    OneOfNone,
    /// `oneOf`: more than one branch matches.
    OneOfMany,
    /// `anyOf`: no branch matches.
    AnyOfNone,
    /// `not`.
    Not,
    /// The `false` schema.
    FalseSchema,
    /// `format`.
    Format,
    /// `pattern`.
    Pattern,
    /// A `pattern`, `patternProperties` or `propertyNames` pattern that needs backtracking
    /// (backreferences, lookaround) gave up after
    /// [`PATTERN_BACKTRACK_LIMIT`](crate::fast::PATTERN_BACKTRACK_LIMIT) steps: the value is
    /// invalid, since whether it matches is unknown.
    PatternBudget,
    /// `minLength`.
    MinLength,
    /// `maxLength`.
    MaxLength,
    /// `minimum`.
    Minimum,
    /// `maximum`.
    Maximum,
    /// `exclusiveMinimum`.
    ExclusiveMinimum,
    /// `exclusiveMaximum`.
    ExclusiveMaximum,
    /// `multipleOf`.
    MultipleOf,
    /// `minItems`.
    MinItems,
    /// `maxItems`.
    MaxItems,
    /// `uniqueItems`.
    UniqueItems,
    /// `contains`.
    Contains,
    /// `minProperties`.
    MinProperties,
    /// `maxProperties`.
    MaxProperties,
    /// `propertyNames`.
    PropertyNames,
    /// `contentEncoding` / `contentMediaType`.
    Content,
    /// Evaluation nested deeper than [`MAX_EVAL_DEPTH`](crate::fast::MAX_EVAL_DEPTH) levels of
    /// applicators and descents: the value is not accepted.
    DepthLimit,
    /// Evaluation took more steps than its budget
    /// ([`WALK_STEPS_BASE`](crate::fast::WALK_STEPS_BASE) plus
    /// [`WALK_STEPS_PER_VALUE`](crate::fast::WALK_STEPS_PER_VALUE) per value): the value is
    /// not accepted.
    WalkBudget,
    /// Anything else the engine reports.
    Other,
}

impl IssueCode {
    /// Stable code, used in reports and `--format json` output.
    pub fn code(self) -> &'static str {
        match self {
            IssueCode::Json(kind) => kind.code(),
            IssueCode::LineTooLong => "input.line-too-long",
            IssueCode::Type => "validate.type",
            IssueCode::Required => "validate.required",
            IssueCode::AdditionalProperty => "validate.additional-property",
            IssueCode::UnevaluatedProperty => "validate.unevaluated-property",
            IssueCode::AdditionalItems => "validate.additional-items",
            IssueCode::UnevaluatedItems => "validate.unevaluated-items",
            IssueCode::Const => "validate.const",
            IssueCode::Enum => "validate.enum",
            IssueCode::Discriminator => "validate.discriminator",
            IssueCode::OneOfNone => "validate.one-of-none",
            IssueCode::OneOfMany => "validate.one-of-many",
            IssueCode::AnyOfNone => "validate.any-of-none",
            IssueCode::Not => "validate.not",
            IssueCode::FalseSchema => "validate.false-schema",
            IssueCode::Format => "validate.format",
            IssueCode::Pattern => "validate.pattern",
            IssueCode::PatternBudget => "validate.pattern-budget",
            IssueCode::MinLength => "validate.min-length",
            IssueCode::MaxLength => "validate.max-length",
            IssueCode::Minimum => "validate.minimum",
            IssueCode::Maximum => "validate.maximum",
            IssueCode::ExclusiveMinimum => "validate.exclusive-minimum",
            IssueCode::ExclusiveMaximum => "validate.exclusive-maximum",
            IssueCode::MultipleOf => "validate.multiple-of",
            IssueCode::MinItems => "validate.min-items",
            IssueCode::MaxItems => "validate.max-items",
            IssueCode::UniqueItems => "validate.unique-items",
            IssueCode::Contains => "validate.contains",
            IssueCode::MinProperties => "validate.min-properties",
            IssueCode::MaxProperties => "validate.max-properties",
            IssueCode::PropertyNames => "validate.property-names",
            IssueCode::Content => "validate.content",
            IssueCode::DepthLimit => "validate.depth-limit",
            IssueCode::WalkBudget => "validate.walk-budget",
            IssueCode::Other => "validate.other",
        }
    }
}

impl fmt::Display for IssueCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.code())
    }
}

/// One thing wrong with a message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Issue {
    /// What kind of problem.
    pub code: IssueCode,
    /// JSON Pointer of the offending value in the message. It always points at a value that
    /// exists: a missing property is reported at its object, an unexpected one at itself.
    /// Empty for input that is not JSON.
    pub instance_pointer: String,
    /// JSON Pointer of the failing keyword in the schema document, e.g.
    /// `/$defs/X/properties/y/minLength`. Empty for input that is not JSON.
    pub schema_pointer: String,
    /// The schema keyword (`minLength`, `oneOf`, `discriminator` …); empty for input that is not
    /// JSON.
    pub keyword: &'static str,
    /// A sentence a person understands.
    pub message: String,
}

impl Issue {
    /// The issue of a document that is not acceptable JSON.
    pub fn from_json_error(err: &JsonError) -> Issue {
        Issue {
            code: IssueCode::Json(err.kind),
            instance_pointer: String::new(),
            schema_pointer: String::new(),
            keyword: "",
            message: err.to_string(),
        }
    }
}

impl fmt::Display for Issue {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if matches!(self.code, IssueCode::Json(_) | IssueCode::LineTooLong) {
            return write!(f, "{} [{}]", self.message, self.code);
        }
        let at = if self.instance_pointer.is_empty() {
            "(root)"
        } else {
            &self.instance_pointer
        };
        write!(
            f,
            "{at}: {} [{} at {}]",
            self.message, self.code, self.schema_pointer
        )
    }
}

/// Compiles validators for the root and the definitions of one document, sharing one index of
/// the document: compiling a definition does not re-read the document.
pub struct ValidatorCompiler {
    document: Arc<Value>,
    engine: Arc<EngineSource>,
    definitions_keyword: &'static str,
    dispatch: Arc<DispatchTable>,
    /// The compiled plan that answers `is_valid`; `None` when the document uses something the
    /// fast path does not implement, and the engine decides alone.
    fast: Option<Arc<FastSchema>>,
    /// For a document without a plan: the applicator graph its walks are counted on first.
    walk: Option<Arc<WalkGraph>>,
}

impl fmt::Debug for ValidatorCompiler {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ValidatorCompiler")
            .field("base", &self.engine.base)
            .finish_non_exhaustive()
    }
}

/// What the engine (`jsonschema`) builds a validator from: the indexed document, its base URI
/// and draft, and for a document whose references nest too deep for one engine, what a report
/// builds a smaller one from.
struct EngineSource {
    registry: Registry<'static>,
    base: String,
    draft: jsonschema::Draft,
    pruning: Option<Pruning>,
}

impl EngineSource {
    /// Indexes `document` (the engine's document) under `base`.
    fn registry(
        draft: jsonschema::Draft,
        base: &str,
        document: Value,
    ) -> Result<Registry<'static>, SchemaError> {
        Registry::new()
            .draft(draft)
            .retrieve_known_draft_meta_schemas(false)
            .add(base, Arc::new(document))
            .and_then(|builder| builder.prepare())
            .map_err(|e| SchemaError::new(SchemaErrorKind::InvalidSchema, "", e.to_string()))
    }

    /// The engine's validator for the schema at `ptr`.
    fn build(&self, ptr: &str) -> Result<jsonschema::Validator, SchemaError> {
        self.build_in(&self.registry, ptr)
    }

    /// The engine's validator for the schema at `ptr` of the document `registry` indexes.
    fn build_in(
        &self,
        registry: &Registry<'static>,
        ptr: &str,
    ) -> Result<jsonschema::Validator, SchemaError> {
        // The wrapper only refers into the indexed document, so every `$ref` of the target
        // resolves against the document's own base and errors carry document locations.
        let wrapper = json!({ "$ref": format!("{}#{}", self.base, fragment_escape(ptr)) });
        jsonschema::options()
            .with_draft(self.draft)
            .offline()
            .should_validate_formats(true)
            .with_format("uuid", format::is_uuid)
            .with_keyword("pattern", pattern::factory)
            .with_keyword("multipleOf", number::factory)
            .with_pattern_options(
                jsonschema::PatternOptions::fancy_regex()
                    .backtrack_limit(crate::fast::PATTERN_BACKTRACK_LIMIT),
            )
            .with_registry(registry)
            .build(&wrapper)
            .map_err(|e| build_error(ptr, &e))
    }
}

impl ValidatorCompiler {
    /// Indexes a document for compilation.
    pub fn new(doc: &SchemaDocument) -> Result<Self, SchemaError> {
        let document = Arc::new(doc.value().clone());
        let base = match doc.id() {
            Some(id) if is_absolute_uri(id) => id.trim_end_matches('#').to_owned(),
            _ => DOCUMENT_BASE_URI.to_owned(),
        };
        let draft = match doc.draft() {
            Draft::Draft07 => jsonschema::Draft::Draft7,
            Draft::Draft202012 => jsonschema::Draft::Draft202012,
        };
        let engine_document = collapse_ref_chains(doc);
        let fast = FastSchema::compile(doc).ok().map(Arc::new);
        // Pruning needs the plan: it tells which definitions a value reaches.
        let pruning = fast
            .as_ref()
            .and_then(|_| Pruning::for_document(doc, &engine_document));
        let registry = EngineSource::registry(draft, &base, engine_document)?;
        Ok(ValidatorCompiler {
            document,
            engine: Arc::new(EngineSource {
                registry,
                base,
                draft,
                pruning,
            }),
            definitions_keyword: doc.definitions_keyword(),
            dispatch: Arc::new(dispatch::build(doc)),
            fast: fast.clone(),
            walk: fast.is_none().then(|| Arc::new(WalkGraph::new(doc))),
        })
    }

    /// A validator for the whole document (its root schema).
    pub fn root(&self) -> Result<Validator, SchemaError> {
        self.compile(String::new())
    }

    /// A validator for one named definition (`$defs/NAME` or `definitions/NAME`).
    pub fn definition(&self, name: &str) -> Result<Validator, SchemaError> {
        if self
            .document
            .get(self.definitions_keyword)
            .and_then(|d| d.get(name))
            .is_none()
        {
            return Err(SchemaError::new(
                SchemaErrorKind::UnknownDefinition,
                "",
                format!(
                    "no definition named {name:?} in {}",
                    self.definitions_keyword
                ),
            ));
        }
        self.compile(pointer::push(
            &format!("/{}", self.definitions_keyword),
            name,
        ))
    }

    /// A validator for the schema at any JSON Pointer of the document.
    pub fn at_pointer(&self, ptr: &str) -> Result<Validator, SchemaError> {
        if pointer::resolve(&self.document, ptr).is_none() {
            return Err(SchemaError::new(
                SchemaErrorKind::UnresolvedRef,
                ptr,
                format!("no schema at {ptr:?}"),
            ));
        }
        self.compile(ptr.to_owned())
    }

    fn compile(&self, ptr: String) -> Result<Validator, SchemaError> {
        let fast = self
            .fast
            .as_ref()
            .and_then(|plan| Some((Arc::clone(plan), plan.at_pointer(&ptr)?)));
        // With a plan, the engine is needed only for the report of an invalid value: it is
        // built then (the engine compiles a long chain of definitions in quadratic time, and a
        // stream of valid messages never needs it).
        let inner = std::sync::OnceLock::new();
        if fast.is_none() {
            let _ = inner.set(self.engine.build(&ptr)?);
        }
        Ok(Validator {
            inner,
            engine: Arc::clone(&self.engine),
            walk: fast.is_none().then(|| self.walk.clone()).flatten(),
            fast,
            document: Arc::clone(&self.document),
            dispatch: Arc::clone(&self.dispatch),
            pointer: ptr,
        })
    }
}

fn build_error(ptr: &str, err: &ValidationError<'_>) -> SchemaError {
    let at = err.instance_path().as_str();
    let message = match err.kind() {
        ValidationErrorKind::Custom { message, .. } => message.clone(),
        ValidationErrorKind::Referencing(e) => format!("reference cannot be resolved: {e}"),
        _ => format!("the schema is not valid for its draft: {err}"),
    };
    let pointer = if at.is_empty() {
        ptr.to_owned()
    } else {
        at.to_owned()
    };
    SchemaError::new(SchemaErrorKind::InvalidSchema, pointer, message)
}

fn is_absolute_uri(id: &str) -> bool {
    match id.split_once(':') {
        Some((scheme, _)) => {
            !scheme.is_empty()
                && scheme.starts_with(|c: char| c.is_ascii_alphabetic())
                && scheme
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
        }
        None => false,
    }
}

impl SchemaDocument {
    /// A validator for the document's root schema.
    pub fn validator(&self) -> Result<Validator, SchemaError> {
        ValidatorCompiler::new(self)?.root()
    }

    /// A validator for one named definition. To compile several, use one
    /// [`ValidatorCompiler`].
    pub fn validator_for(&self, name: &str) -> Result<Validator, SchemaError> {
        ValidatorCompiler::new(self)?.definition(name)
    }
}

/// A compiled schema: [`is_valid`](Validator::is_valid) for the verdict,
/// [`validate`](Validator::validate) for every issue.
pub struct Validator {
    /// The engine's validator: built with the validator when there is no plan, else on the
    /// first report.
    inner: std::sync::OnceLock<jsonschema::Validator>,
    engine: Arc<EngineSource>,
    fast: Option<(Arc<FastSchema>, Target)>,
    /// Without a plan: the walk each value is counted on before the engine walks it.
    walk: Option<Arc<WalkGraph>>,
    document: Arc<Value>,
    dispatch: Arc<DispatchTable>,
    pointer: String,
}

impl fmt::Debug for Validator {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Validator")
            .field("pointer", &self.pointer)
            .finish_non_exhaustive()
    }
}

impl Validator {
    /// JSON Pointer of the compiled schema in its document (empty for the root).
    pub fn schema_pointer(&self) -> &str {
        &self.pointer
    }

    /// The verdict alone. Agrees with [`validate`](Validator::validate) returning no issue.
    pub fn is_valid(&self, instance: &Value) -> bool {
        !too_deep(instance) && self.verdict(instance)
    }

    /// The verdict on a value within [`MAX_JSON_DEPTH`]: the compiled plan when there is one
    /// (same verdicts, checked by `tests/fast_differential.rs`), else the engine.
    fn verdict(&self, instance: &Value) -> bool {
        match &self.fast {
            Some((plan, target)) => plan.is_valid(*target, instance),
            None => {
                self.walk_limit(instance).is_none()
                    && self.engine().is_ok_and(|e| e.is_valid(instance))
            }
        }
    }

    /// The limit the engine's walk of `instance` would run into (documents without a plan).
    fn walk_limit(&self, instance: &Value) -> Option<EvalLimit> {
        self.walk.as_ref()?.check(&self.pointer, instance).err()
    }

    /// Every issue of a parsed message; empty when it is valid.
    pub fn validate(&self, instance: &Value) -> Vec<Issue> {
        if too_deep(instance) {
            return vec![Issue::from_json_error(&JsonError {
                kind: JsonErrorKind::TooDeep,
                line: 0,
                column: 0,
                byte_offset: None,
                message: format!("nesting deeper than {MAX_JSON_DEPTH} levels"),
            })];
        }
        self.validate_shallow(instance)
    }

    /// [`validate`](Validator::validate) for a value known to nest at most [`MAX_JSON_DEPTH`]
    /// levels (the strict parser guarantees it).
    fn validate_shallow(&self, instance: &Value) -> Vec<Issue> {
        // Collecting errors costs more than deciding; most messages are valid.
        let mut pruned = None;
        match &self.fast {
            Some((plan, target)) => {
                // The engine collects every error of its walk at once: a walk over budget is
                // answered by the limit, not by millions of issues.
                let walked = match (plan.verdict(*target, instance), &self.engine.pruning) {
                    (Ok(true), _) => return Vec::new(),
                    (Ok(false), None) => plan.report_within_budget(*target, instance),
                    (Ok(false), Some(pruning)) => plan
                        .report_reaches(*target, instance, pruning.targets())
                        .map(|reached| pruned = pruning.document_for(&reached, &self.pointer)),
                    (Err(limit), _) => Err(limit),
                };
                if let Err(limit) = walked {
                    return vec![self.limit_issue(limit)];
                }
            }
            None => {
                if let Some(limit) = self.walk_limit(instance) {
                    return vec![self.limit_issue(limit)];
                }
                if self.engine().is_ok_and(|e| e.is_valid(instance)) {
                    return Vec::new();
                }
            }
        }
        let mut reporter = Reporter {
            validator: self,
            root: instance,
            out: Vec::new(),
        };
        // A document whose references nest too deep for one engine gets one built for the
        // definitions this value reaches (the others are `true` in it).
        let own;
        let engine = match pruned {
            Some(document) => {
                match EngineSource::registry(self.engine.draft, &self.engine.base, document)
                    .and_then(|registry| self.engine.build_in(&registry, &self.pointer))
                {
                    Ok(engine) => {
                        own = engine;
                        &own
                    }
                    Err(err) => return vec![self.engine_issue(&err)],
                }
            }
            None => match self.engine() {
                Ok(engine) => engine,
                Err(err) => return vec![self.engine_issue(&err)],
            },
        };
        for err in engine.iter_errors(instance) {
            reporter.report(&err, 0);
        }
        dedup(reporter.out)
    }

    /// The engine's validator, built on first use.
    fn engine(&self) -> Result<&jsonschema::Validator, SchemaError> {
        if let Some(engine) = self.inner.get() {
            return Ok(engine);
        }
        let built = self.engine.build(&self.pointer)?;
        Ok(self.inner.get_or_init(|| built))
    }

    /// The issue of a report the engine could not be built for (the compiled plan took the
    /// schema; the engine refused it).
    fn engine_issue(&self, err: &SchemaError) -> Issue {
        Issue {
            code: IssueCode::Other,
            instance_pointer: String::new(),
            schema_pointer: self.pointer.clone(),
            keyword: "",
            message: format!("the value is invalid; its issues cannot be listed: {err}"),
        }
    }

    /// The one issue of a validation stopped by a limit.
    fn limit_issue(&self, limit: EvalLimit) -> Issue {
        let (code, message) = match limit {
            EvalLimit::Depth => (
                IssueCode::DepthLimit,
                format!(
                    "the schema nests deeper than {MAX_EVAL_DEPTH} levels of applicators on this value; it is not accepted"
                ),
            ),
            _ => (
                IssueCode::WalkBudget,
                "checking this value against the schema takes more steps than the budget (its applicators fan out); it is not accepted".to_owned(),
            ),
        };
        Issue {
            code,
            instance_pointer: String::new(),
            schema_pointer: self.pointer.clone(),
            keyword: "",
            message,
        }
    }

    /// Parses a message with the strict parser ([`json::parse_json`]) and validates it. Input
    /// that is not acceptable JSON is one issue with its `json.*` code.
    pub fn validate_bytes(&self, bytes: &[u8]) -> Vec<Issue> {
        match json::parse_json(bytes) {
            Ok(value) => self.validate_shallow(&value),
            Err(err) => vec![Issue::from_json_error(&err)],
        }
    }

    /// [`validate_bytes`](Validator::validate_bytes) with the verdict decided on the compiled
    /// plan over `tape` (reused from message to message): a valid message is never turned into
    /// a value, and only an invalid one is parsed again to collect its issues. Without a plan
    /// (a document the fast path does not implement) it is `validate_bytes`.
    pub fn validate_bytes_in(&self, bytes: &[u8], tape: &mut Tape) -> Vec<Issue> {
        let Some((plan, target)) = &self.fast else {
            return self.validate_bytes(bytes);
        };
        match crate::fast::parse(bytes, tape) {
            Ok(parsed) if parsed.is_valid(plan, *target) => Vec::new(),
            Ok(_) => self.validate_bytes(bytes),
            Err(err) => vec![Issue::from_json_error(&err)],
        }
    }

    /// The label of a union branch: the definition it refers to, else its index.
    fn branch_label(&self, union_at: &str, index: usize) -> String {
        let branch = pointer::resolve(&self.document, &format!("{union_at}/{index}"));
        match branch.and_then(|b| b.get("$ref")).and_then(Value::as_str) {
            Some(reference) => reference
                .rsplit('/')
                .next()
                .and_then(pointer::unescape_token)
                .unwrap_or_else(|| reference.to_owned()),
            None => format!("alternative {}", index + 1),
        }
    }
}

/// Whether a value nests deeper than [`MAX_JSON_DEPTH`]; iterative, so that a value built by
/// other means than [`json::parse_json`] cannot overflow the stack of the recursive engine.
fn too_deep(value: &Value) -> bool {
    let mut stack: Vec<(&Value, usize)> = vec![(value, 0)];
    while let Some((value, depth)) = stack.pop() {
        let children: Box<dyn Iterator<Item = &Value>> = match value {
            Value::Array(items) => Box::new(items.iter()),
            Value::Object(map) => Box::new(map.values()),
            _ => continue,
        };
        if depth + 1 > MAX_JSON_DEPTH {
            return true;
        }
        stack.extend(
            children
                .filter(|c| c.is_array() || c.is_object())
                .map(|c| (c, depth + 1)),
        );
    }
    false
}

/// Turns the engine's error tree into issues.
struct Reporter<'v> {
    validator: &'v Validator,
    root: &'v Value,
    out: Vec<Issue>,
}

impl Reporter<'_> {
    fn push(
        &mut self,
        code: IssueCode,
        keyword: &'static str,
        err: &ValidationError<'_>,
        message: String,
    ) {
        self.out.push(Issue {
            code,
            instance_pointer: err.instance_path().as_str().to_owned(),
            schema_pointer: err.schema_path().as_str().to_owned(),
            keyword,
            message,
        });
    }

    /// A count keyword's limit as the schema writes it (`1e40`, not the engine's clamped
    /// integer).
    fn limit_text(&self, err: &ValidationError<'_>, limit: u64) -> String {
        match pointer::resolve(&self.validator.document, err.schema_path().as_str()) {
            // serde_json prints `1e40` as `1e+40`; a schema author writes the former.
            Some(Value::Number(n)) => n.to_string().replacen("e+", "e", 1),
            _ => limit.to_string(),
        }
    }

    /// [`Reporter::limit_text`] with its unit.
    fn limit(&self, err: &ValidationError<'_>, limit: u64, one: &str, many: &str) -> String {
        let text = self.limit_text(err, limit);
        if text == "1" {
            format!("1 {one}")
        } else {
            format!("{text} {many}")
        }
    }

    fn report(&mut self, err: &ValidationError<'_>, depth: usize) {
        let instance = err.instance();
        let value: &Value = instance.as_ref();
        let shown = message::preview(value);
        match err.kind() {
            ValidationErrorKind::OneOfNotValid { context } => {
                self.union(err, context, IssueCode::OneOfNone, "oneOf", depth);
            }
            ValidationErrorKind::AnyOf { context } => {
                self.union(err, context, IssueCode::AnyOfNone, "anyOf", depth);
            }
            ValidationErrorKind::OneOfMultipleValid { context } => {
                let union_at = err.schema_path().as_str();
                let valid: Vec<String> = context
                    .iter()
                    .enumerate()
                    .filter(|(_, issues)| issues.is_empty())
                    .map(|(i, _)| self.validator.branch_label(union_at, i))
                    .collect();
                let message = format!(
                    "matches {} alternatives ({}) where exactly one must match",
                    valid.len(),
                    valid.join(", ")
                );
                self.push(IssueCode::OneOfMany, "oneOf", err, message);
            }
            ValidationErrorKind::AdditionalProperties { unexpected } => {
                for name in unexpected {
                    self.property_issue(
                        err,
                        IssueCode::AdditionalProperty,
                        "additionalProperties",
                        name,
                    );
                }
            }
            ValidationErrorKind::UnevaluatedProperties { unexpected } => {
                for name in unexpected {
                    self.property_issue(
                        err,
                        IssueCode::UnevaluatedProperty,
                        "unevaluatedProperties",
                        name,
                    );
                }
            }
            ValidationErrorKind::PropertyNames { error } => {
                let name = error
                    .instance()
                    .as_ref()
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let mut inner = Reporter {
                    validator: self.validator,
                    root: self.root,
                    out: Vec::new(),
                };
                inner.report(error, depth + 1);
                let why = inner
                    .out
                    .first()
                    .map(|i| i.message.clone())
                    .unwrap_or_default();
                let message = format!(
                    "property name {} is not allowed: {why}",
                    message::preview(&json!(name))
                );
                let code = match inner.out.first() {
                    Some(i) if i.code == IssueCode::PatternBudget => IssueCode::PatternBudget,
                    _ => IssueCode::PropertyNames,
                };
                self.push(code, "propertyNames", err, message);
            }
            ValidationErrorKind::Type { kind } => {
                let expected = match kind {
                    TypeKind::Single(t) => t.to_string(),
                    TypeKind::Multiple(set) => set
                        .iter()
                        .map(|t| t.to_string())
                        .collect::<Vec<_>>()
                        .join(" or "),
                };
                let found = message::type_name(value);
                self.push(
                    IssueCode::Type,
                    "type",
                    err,
                    format!("{shown} is {} {found}, expected {expected}", article(found)),
                );
            }
            ValidationErrorKind::Required { property } => {
                let name = property
                    .as_str()
                    .map_or_else(|| property.to_string(), |s| format!("{s:?}"));
                self.push(
                    IssueCode::Required,
                    "required",
                    err,
                    format!("missing required property {name}"),
                );
            }
            ValidationErrorKind::Constant { expected_value } => {
                let message = format!(
                    "{shown} is not the required value {}",
                    message::preview(expected_value)
                );
                self.push(IssueCode::Const, "const", err, message);
            }
            ValidationErrorKind::Enum { options } => {
                let allowed = match options.as_ref() {
                    Value::Array(values) => message::list_values(values.iter()),
                    other => message::preview(other),
                };
                self.push(
                    IssueCode::Enum,
                    "enum",
                    err,
                    format!("{shown} is not one of {allowed}"),
                );
            }
            ValidationErrorKind::Format { format } => {
                self.push(
                    IssueCode::Format,
                    "format",
                    err,
                    format!("{shown} is not a valid {format}"),
                );
            }
            ValidationErrorKind::Pattern { pattern } => {
                self.push(
                    IssueCode::Pattern,
                    "pattern",
                    err,
                    format!("{shown} does not match the pattern {pattern}"),
                );
            }
            ValidationErrorKind::BacktrackLimitExceeded { error } => {
                let message = format!("the pattern could not be evaluated on {shown}: {error}");
                self.push(IssueCode::PatternBudget, "pattern", err, message);
            }
            ValidationErrorKind::RegexEngineFailure { message } => {
                let message = format!("the pattern could not be evaluated on {shown}: {message}");
                self.push(IssueCode::Pattern, "pattern", err, message);
            }
            ValidationErrorKind::Custom { keyword, message } if keyword == "pattern" => {
                let code = if message.starts_with(pattern::BUDGET_MESSAGE_START) {
                    IssueCode::PatternBudget
                } else {
                    IssueCode::Pattern
                };
                self.push(code, "pattern", err, message.clone());
            }
            ValidationErrorKind::Custom { keyword, message } if keyword == "multipleOf" => {
                self.push(IssueCode::MultipleOf, "multipleOf", err, message.clone());
            }
            ValidationErrorKind::Custom { message, .. } => {
                self.push(IssueCode::Other, "", err, message.clone());
            }
            ValidationErrorKind::MinLength { limit } => {
                let message = format!(
                    "{shown} is shorter than {}",
                    self.limit(err, *limit, "character", "characters")
                );
                self.push(IssueCode::MinLength, "minLength", err, message);
            }
            ValidationErrorKind::MaxLength { limit } => {
                let message = format!(
                    "{shown} is longer than {}",
                    self.limit(err, *limit, "character", "characters")
                );
                self.push(IssueCode::MaxLength, "maxLength", err, message);
            }
            ValidationErrorKind::Minimum { limit } => {
                self.push(
                    IssueCode::Minimum,
                    "minimum",
                    err,
                    format!("{shown} is less than the minimum {limit}"),
                );
            }
            ValidationErrorKind::Maximum { limit } => {
                self.push(
                    IssueCode::Maximum,
                    "maximum",
                    err,
                    format!("{shown} is greater than the maximum {limit}"),
                );
            }
            ValidationErrorKind::ExclusiveMinimum { limit } => {
                let message = format!("{shown} is not greater than the exclusive minimum {limit}");
                self.push(
                    IssueCode::ExclusiveMinimum,
                    "exclusiveMinimum",
                    err,
                    message,
                );
            }
            ValidationErrorKind::ExclusiveMaximum { limit } => {
                let message = format!("{shown} is not less than the exclusive maximum {limit}");
                self.push(
                    IssueCode::ExclusiveMaximum,
                    "exclusiveMaximum",
                    err,
                    message,
                );
            }
            ValidationErrorKind::MultipleOf { multiple_of } => {
                let message = format!("{shown} is not a multiple of {}", json!(multiple_of));
                self.push(IssueCode::MultipleOf, "multipleOf", err, message);
            }
            ValidationErrorKind::MinItems { limit } => {
                let message = format!(
                    "{} items, fewer than the minimum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MinItems, "minItems", err, message);
            }
            ValidationErrorKind::MaxItems { limit } => {
                let message = format!(
                    "{} items, more than the maximum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MaxItems, "maxItems", err, message);
            }
            ValidationErrorKind::MinProperties { limit } => {
                let message = format!(
                    "{} properties, fewer than the minimum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MinProperties, "minProperties", err, message);
            }
            ValidationErrorKind::MaxProperties { limit } => {
                let message = format!(
                    "{} properties, more than the maximum of {}",
                    count_of(value),
                    self.limit_text(err, *limit)
                );
                self.push(IssueCode::MaxProperties, "maxProperties", err, message);
            }
            ValidationErrorKind::UniqueItems => {
                let message = match duplicate_pair(value) {
                    Some((a, b)) => format!("items {a} and {b} are equal; items must be unique"),
                    None => "items must be unique".to_owned(),
                };
                self.push(IssueCode::UniqueItems, "uniqueItems", err, message);
            }
            ValidationErrorKind::Contains => {
                let message = "no item matches the `contains` schema".to_owned();
                self.push(IssueCode::Contains, "contains", err, message);
            }
            ValidationErrorKind::AdditionalItems { limit } => {
                let message = format!(
                    "more than {} are not allowed",
                    message::plural(*limit as u64, "item", "items")
                );
                self.push(IssueCode::AdditionalItems, "additionalItems", err, message);
            }
            ValidationErrorKind::UnevaluatedItems { unexpected } => {
                let message = format!("unexpected items: {}", unexpected.join(", "));
                self.push(
                    IssueCode::UnevaluatedItems,
                    "unevaluatedItems",
                    err,
                    message,
                );
            }
            ValidationErrorKind::Not { .. } => {
                self.push(
                    IssueCode::Not,
                    "not",
                    err,
                    format!("{shown} matches a schema it must not match"),
                );
            }
            ValidationErrorKind::FalseSchema => {
                self.push(
                    IssueCode::FalseSchema,
                    "false",
                    err,
                    format!("{shown} is not allowed here"),
                );
            }
            ValidationErrorKind::ContentEncoding { content_encoding } => {
                let message = format!("{shown} is not valid {content_encoding}");
                self.push(IssueCode::Content, "contentEncoding", err, message);
            }
            ValidationErrorKind::FromUtf8 { .. } => {
                let message = format!("{shown} does not decode to UTF-8 text");
                self.push(IssueCode::Content, "contentEncoding", err, message);
            }
            ValidationErrorKind::ContentMediaType { content_media_type } => {
                let message = format!("{shown} is not valid {content_media_type}");
                self.push(IssueCode::Content, "contentMediaType", err, message);
            }
            ValidationErrorKind::Referencing(e) => {
                self.push(
                    IssueCode::Other,
                    "$ref",
                    err,
                    format!("reference cannot be resolved: {e}"),
                );
            }
        }
    }

    fn property_issue(
        &mut self,
        err: &ValidationError<'_>,
        code: IssueCode,
        keyword: &'static str,
        name: &str,
    ) {
        self.out.push(Issue {
            code,
            instance_pointer: pointer::push(err.instance_path().as_str(), name),
            schema_pointer: err.schema_path().as_str().to_owned(),
            keyword,
            message: format!(
                "property {} is not allowed here",
                message::preview(&json!(name))
            ),
        });
    }

    /// A failed `oneOf` / `anyOf`: the selected branch's issues when a tag picks one, else a
    /// summary of the branches.
    fn union(
        &mut self,
        err: &ValidationError<'_>,
        context: &[Vec<ValidationError<'static>>],
        code: IssueCode,
        keyword: &'static str,
        depth: usize,
    ) {
        let union_at = err.schema_path().as_str();
        let instance_at = err.instance_path().as_str();
        let validator = self.validator;
        if depth < MAX_REPORT_DEPTH
            && let (Some(dispatch), Some(Value::Object(object))) = (
                validator.dispatch.get(union_at),
                pointer::resolve(self.root, instance_at),
            )
        {
            let tag_keyword = if dispatch.explicit {
                "discriminator"
            } else {
                keyword
            };
            let tag_schema = if dispatch.explicit {
                format!(
                    "{}/discriminator",
                    union_at.rsplit_once('/').map_or("", |(p, _)| p)
                )
            } else {
                union_at.to_owned()
            };
            match object.get(&dispatch.property) {
                None if dispatch.tag_required => {
                    self.out.push(Issue {
                        code: IssueCode::Required,
                        instance_pointer: instance_at.to_owned(),
                        schema_pointer: tag_schema,
                        keyword: tag_keyword,
                        message: format!(
                            "missing required property {:?}, which selects the kind of object ({})",
                            dispatch.property,
                            message::list_values(dispatch.tag_values())
                        ),
                    });
                    return;
                }
                None => {}
                Some(tag) => match dispatch.branch_for(tag) {
                    Some(branch) if context.get(branch).is_some_and(|e| !e.is_empty()) => {
                        for inner in &context[branch] {
                            self.report(inner, depth + 1);
                        }
                        return;
                    }
                    Some(_) => {}
                    None => {
                        self.out.push(Issue {
                            code: IssueCode::Discriminator,
                            instance_pointer: pointer::push(instance_at, &dispatch.property),
                            schema_pointer: tag_schema,
                            keyword: tag_keyword,
                            message: format!(
                                "{} is not a known {:?}; expected {}",
                                message::preview(tag),
                                dispatch.property,
                                message::list_values(dispatch.tag_values())
                            ),
                        });
                        return;
                    }
                },
            }
        }
        let mut message = format!(
            "{} matches none of the {} alternatives",
            message::preview(err.instance().as_ref()),
            context.len()
        );
        if context.len() <= MAX_SUMMARISED_BRANCHES && depth < MAX_REPORT_DEPTH {
            let mut parts = Vec::new();
            for (i, branch) in context.iter().enumerate() {
                let mut inner = Reporter {
                    validator,
                    root: self.root,
                    out: Vec::new(),
                };
                for e in branch {
                    inner.report(e, depth + 1);
                }
                let Some(first) = inner.out.first() else {
                    continue;
                };
                let at = if first.instance_pointer == instance_at {
                    String::new()
                } else {
                    format!("at {} ", first.instance_pointer)
                };
                let more = match inner.out.len() {
                    1 => String::new(),
                    n => format!(" (+{} more)", n - 1),
                };
                parts.push(format!(
                    "{}: {at}{}{more}",
                    validator.branch_label(union_at, i),
                    first.message
                ));
            }
            if !parts.is_empty() {
                message.push_str(": ");
                message.push_str(&parts.join("; "));
            }
        }
        self.push(code, keyword, err, message);
    }
}

/// The issues without repeats, in first-seen order: a schema that reaches one keyword by many
/// paths (an `allOf` of two references to the same definition) reports it once.
fn dedup(issues: Vec<Issue>) -> Vec<Issue> {
    let mut seen = std::collections::HashSet::with_capacity(issues.len());
    issues
        .into_iter()
        .filter(|i| {
            seen.insert((
                i.code.code(),
                i.instance_pointer.clone(),
                i.schema_pointer.clone(),
                i.message.clone(),
            ))
        })
        .collect()
}

fn article(type_name: &str) -> &'static str {
    if type_name.starts_with(['a', 'e', 'i', 'o', 'u']) {
        "an"
    } else {
        "a"
    }
}

fn count_of(value: &Value) -> String {
    match value {
        Value::Array(items) => format!("the array has {}", items.len()),
        Value::Object(map) => format!("the object has {}", map.len()),
        _ => "the value has".to_owned(),
    }
}

fn duplicate_pair(value: &Value) -> Option<(usize, usize)> {
    let items = value.as_array()?;
    if items.len() > MAX_DUPLICATE_SEARCH_ITEMS {
        return None;
    }
    for (i, a) in items.iter().enumerate() {
        for (j, b) in items.iter().enumerate().skip(i + 1) {
            if json_equal(a, b) {
                return Some((i, j));
            }
        }
    }
    None
}

/// JSON Schema equality: numbers by value, objects regardless of key order.
fn json_equal(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) => x.as_f64() == y.as_f64(),
        (Value::Array(x), Value::Array(y)) => {
            x.len() == y.len() && x.iter().zip(y).all(|(a, b)| json_equal(a, b))
        }
        (Value::Object(x), Value::Object(y)) => {
            x.len() == y.len()
                && x.iter()
                    .all(|(k, v)| y.get(k).is_some_and(|w| json_equal(v, w)))
        }
        _ => a == b,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fragments_are_percent_encoded() {
        assert_eq!(fragment_escape("/$defs/a b%"), "/$defs/a%20b%25");
        assert_eq!(fragment_escape("/definitions/X~1Y"), "/definitions/X~1Y");
    }

    #[test]
    fn absolute_uris() {
        assert!(is_absolute_uri("https://openclaw.ai/protocol.schema.json"));
        assert!(is_absolute_uri("urn:x:y"));
        assert!(!is_absolute_uri("schema.json"));
        assert!(!is_absolute_uri("/a:b"));
    }

    #[test]
    fn depth_is_bounded_without_recursion() {
        let mut v = json!(1);
        for _ in 0..MAX_JSON_DEPTH {
            v = json!([v]);
        }
        assert!(!too_deep(&v));
        let v = json!([v]);
        assert!(too_deep(&v));
    }
}
