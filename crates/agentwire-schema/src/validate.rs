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
//!   issue code, which leaves the value undecided ([`IssueCode::is_undecided`]), never invalid;
//!   the compiled plan decides a subschema once per value when a plain walk spends the budget,
//!   so applicators that fan out are decided; an issue reached by several paths is reported
//!   once;
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
mod report;
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
use report::{Reporter, dedup};
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
    /// applicators and descents: the validity of the value is not decided
    /// ([`is_undecided`](IssueCode::is_undecided)).
    DepthLimit,
    /// Evaluation took more steps than its budget
    /// ([`WALK_STEPS_BASE`](crate::fast::WALK_STEPS_BASE) plus
    /// [`WALK_STEPS_PER_VALUE`](crate::fast::WALK_STEPS_PER_VALUE) per value): the validity
    /// of the value is not decided ([`is_undecided`](IssueCode::is_undecided)).
    WalkBudget,
    /// The value is invalid, but listing its issues takes more steps than the budget (the
    /// report visits every branch of every applicator, where the verdict reuses what it
    /// decided): one issue at the instance path of the first error, in AJV's order.
    ReportBudget,
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
            IssueCode::ReportBudget => "validate.report-budget",
            IssueCode::Other => "validate.other",
        }
    }
}

impl IssueCode {
    /// Whether a limit stopped the check before it could decide: the message is then neither
    /// valid nor invalid, and this issue is its only one.
    pub fn is_undecided(self) -> bool {
        matches!(self, IssueCode::DepthLimit | IssueCode::WalkBudget)
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
        document: Arc<Value>,
    ) -> Result<Registry<'static>, SchemaError> {
        Registry::new()
            .draft(draft)
            .retrieve_known_draft_meta_schemas(false)
            .add(base, document)
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
        let engine_document = Arc::new(collapse_ref_chains(doc));
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
            tagged: TaggedUnion::at(&self.document, &self.dispatch, &ptr),
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
    /// When the schema is a tagged union and nothing else: the report of an invalid value is
    /// the report of the branch its tag selects.
    tagged: Option<TaggedUnion>,
}

/// A schema that is a `oneOf` / `anyOf` with a tag ([`dispatch`]) and no other assertion: the
/// report of a value whose tag selects a branch is that branch's (what the report of the whole
/// union says, see `Reporter::union`), so the branch's own engine makes it, without the union's
/// engine collecting (and copying the value into) the errors of every other branch.
struct TaggedUnion {
    /// Pointer of the `oneOf` / `anyOf` keyword, as the dispatch table is keyed.
    union_at: String,
    /// Each branch's engine, built on the first report that needs it (`None`: it cannot be
    /// built, and the union's engine reports).
    branches: Box<[std::sync::OnceLock<Option<jsonschema::Validator>>]>,
}

/// Keywords that assert or apply subschemas besides a union: a schema with any of them is not a
/// tagged union alone.
const ASSERTING_KEYWORDS: &[&str] = &[
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    "type",
    "enum",
    "const",
    "properties",
    "required",
    "additionalProperties",
    "patternProperties",
    "propertyNames",
    "minProperties",
    "maxProperties",
    "dependencies",
    "dependentRequired",
    "dependentSchemas",
    "items",
    "additionalItems",
    "prefixItems",
    "contains",
    "minContains",
    "maxContains",
    "minItems",
    "maxItems",
    "uniqueItems",
    "unevaluatedItems",
    "unevaluatedProperties",
    "allOf",
    "not",
    "if",
    "then",
    "else",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "format",
    "contentEncoding",
    "contentMediaType",
    "contentSchema",
];

impl TaggedUnion {
    /// The tagged union the schema at `ptr` is, if it is one and nothing else.
    fn at(document: &Value, dispatch: &DispatchTable, ptr: &str) -> Option<TaggedUnion> {
        let Value::Object(schema) = pointer::resolve(document, ptr)? else {
            return None;
        };
        if ASSERTING_KEYWORDS.iter().any(|k| schema.contains_key(*k)) {
            return None;
        }
        let (keyword, branches) = match (schema.get("oneOf"), schema.get("anyOf")) {
            (Some(Value::Array(b)), None) => ("oneOf", b),
            (None, Some(Value::Array(b))) => ("anyOf", b),
            _ => return None,
        };
        let union_at = pointer::push(ptr, keyword);
        dispatch.contains_key(&union_at).then(|| TaggedUnion {
            union_at,
            branches: branches
                .iter()
                .map(|_| std::sync::OnceLock::new())
                .collect(),
        })
    }
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
                // The engine collects every error of its walk at once, and its walk visits
                // every path of applicators that fan out: a walk over budget is answered by one
                // issue at the first error, not by millions of issues.
                let walked = match (plan.verdict(*target, instance), &self.engine.pruning) {
                    (Ok(true), _) => return Vec::new(),
                    (Ok(false), None) => plan.report_within_budget(*target, instance),
                    (Ok(false), Some(pruning)) => plan
                        .report_reaches(*target, instance, pruning.targets())
                        .map(|reached| pruned = pruning.document_for(&reached, &self.pointer)),
                    (Err(limit), _) => return vec![self.limit_issue(limit)],
                };
                // The verdict is decided; only the list of issues is out of reach.
                if walked.is_err() {
                    let first = plan.first_error_path(*target, instance);
                    return vec![self.report_budget_issue(first)];
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
        if pruned.is_none()
            && let Some(issues) = self.report_through_tag(instance)
        {
            return dedup(issues);
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
                match EngineSource::registry(
                    self.engine.draft,
                    &self.engine.base,
                    Arc::new(document),
                )
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

    /// The issues of an invalid value of a tagged union whose tag selects a branch, from that
    /// branch's engine: what the union's report says (`Reporter::union`), at the cost of one
    /// branch. `None` when it does not apply (no tag, an unknown one, a branch that holds).
    fn report_through_tag(&self, instance: &Value) -> Option<Vec<Issue>> {
        let tagged = self.tagged.as_ref()?;
        let dispatch = self.dispatch.get(&tagged.union_at)?;
        let Value::Object(object) = instance else {
            return None;
        };
        let branch = dispatch.branch_for(object.get(&dispatch.property)?)?;
        let engine = tagged
            .branches
            .get(branch)?
            .get_or_init(|| {
                self.engine
                    .build(&format!("{}/{branch}", tagged.union_at))
                    .ok()
            })
            .as_ref()?;
        let mut reporter = Reporter {
            validator: self,
            root: instance,
            out: Vec::new(),
        };
        // The union's report of the branch's errors is one level down.
        for err in engine.iter_errors(instance) {
            reporter.report(&err, 1);
        }
        (!reporter.out.is_empty()).then_some(reporter.out)
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

    /// The one issue of a validation stopped by a limit before it could decide.
    fn limit_issue(&self, limit: EvalLimit) -> Issue {
        let (code, message) = match limit {
            EvalLimit::Depth => (
                IssueCode::DepthLimit,
                format!(
                    "the schema nests deeper than {MAX_EVAL_DEPTH} levels of applicators on this value; whether it is valid is not decided"
                ),
            ),
            _ => (
                IssueCode::WalkBudget,
                "checking this value against the schema takes more steps than the budget (its applicators fan out); whether it is valid is not decided".to_owned(),
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

    /// The one issue of an invalid value whose report is over the step budget, at the instance
    /// path of its first error (`None`: unknown, the root).
    fn report_budget_issue(&self, first_error: Option<String>) -> Issue {
        Issue {
            code: IssueCode::ReportBudget,
            instance_pointer: first_error.unwrap_or_default(),
            schema_pointer: self.pointer.clone(),
            keyword: "",
            message: "the value is invalid; listing its issues takes more steps than the budget (the report visits every branch of applicators that fan out), so the first error alone is located".to_owned(),
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
