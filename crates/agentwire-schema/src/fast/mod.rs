//! The fast validation path: a schema document compiled once into a plan ([`FastSchema`]),
//! run over parsed values or straight over message bytes read into a reusable [`Tape`].
//!
//! It answers valid/invalid (and, on the failure path, where the first error is) with the same
//! verdicts as the reference validator; issue collection stays with the reference validator.
//! A schema that uses something the plan does not implement is refused with a [`FastError`]
//! instead of being validated differently.

pub(crate) mod ecma;
mod eval;
mod instance;
mod plan;
#[cfg(feature = "sample")]
pub mod sample;
mod tape;

use std::collections::HashMap;
use std::fmt;

use serde_json::Value;

use crate::document::SchemaDocument;
use crate::json::{self, JsonError};
use crate::pointer;
pub use ecma::PATTERN_BACKTRACK_LIMIT;
pub use tape::Tape;

pub use eval::{
    EvalLimit, MAX_EVAL_DEPTH, MAX_MEMO_ENTRIES, WALK_STEPS_BASE, WALK_STEPS_PER_VALUE,
};
use eval::{bounded, budget, count_values, decide};
use instance::{Instance, Kind};
use plan::{Compiler, NodeId, Plan};

/// Why a schema cannot be compiled into a fast plan.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FastError {
    /// The schema uses a keyword or form the plan does not implement.
    Unsupported {
        /// Schema pointer of the culprit.
        pointer: String,
        /// What is not supported.
        keyword: String,
    },
    /// A `pattern` the translator cannot carry over to ECMA-262 semantics.
    Pattern {
        /// Schema pointer of the culprit.
        pointer: String,
        /// The pattern source.
        pattern: String,
        /// Why.
        message: String,
    },
    /// A reference or pointer that does not resolve.
    Unresolved {
        /// The pointer that does not resolve.
        pointer: String,
    },
    /// A keyword whose value has the wrong shape.
    Invalid {
        /// Schema pointer of the culprit.
        pointer: String,
        /// Why.
        message: String,
    },
}

impl FastError {
    fn invalid(pointer: &str, message: &str) -> FastError {
        FastError::Invalid {
            pointer: pointer.to_owned(),
            message: message.to_owned(),
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        match self {
            FastError::Unsupported { .. } => "fast.unsupported",
            FastError::Pattern { .. } => "fast.pattern",
            FastError::Unresolved { .. } => "fast.unresolved",
            FastError::Invalid { .. } => "fast.invalid-schema",
        }
    }
}

impl fmt::Display for FastError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            FastError::Unsupported { pointer, keyword } => {
                write!(
                    f,
                    "{}: {keyword} at {pointer:?} is not supported by the fast path",
                    self.code()
                )
            }
            FastError::Pattern {
                pointer,
                pattern,
                message,
            } => {
                write!(
                    f,
                    "{}: pattern {pattern:?} at {pointer:?}: {message}",
                    self.code()
                )
            }
            FastError::Unresolved { pointer } => {
                write!(f, "{}: {pointer:?} does not resolve", self.code())
            }
            FastError::Invalid { pointer, message } => {
                write!(f, "{}: at {pointer:?}: {message}", self.code())
            }
        }
    }
}

impl std::error::Error for FastError {}

/// One schema of a compiled document that instances can be validated against.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Target(NodeId);

/// A document compiled into a validation plan: its root and every named definition.
#[derive(Debug)]
pub struct FastSchema {
    plan: Plan,
    root: Target,
    definitions: HashMap<String, Target>,
}

impl FastSchema {
    /// Compiles the root and every definition of `doc`.
    pub fn compile(doc: &SchemaDocument) -> Result<FastSchema, FastError> {
        let mut compiler = Compiler::new(doc);
        let root = Target(compiler.compile_pointer("")?);
        let mut definitions = HashMap::new();
        let names: Vec<String> = doc.definitions().map(|(n, _)| n.to_owned()).collect();
        for name in names {
            let ptr = pointer::push(&format!("/{}", doc.definitions_keyword()), &name);
            definitions.insert(name, Target(compiler.compile_pointer(&ptr)?));
        }
        Ok(FastSchema {
            plan: compiler.finish()?,
            root,
            definitions,
        })
    }

    /// The document's root schema.
    pub fn root(&self) -> Target {
        self.root
    }

    /// A named definition.
    pub fn definition(&self, name: &str) -> Option<Target> {
        self.definitions.get(name).copied()
    }

    /// The schema at a JSON Pointer of the document, if it was compiled.
    pub fn at_pointer(&self, ptr: &str) -> Option<Target> {
        self.plan.by_pointer.get(ptr).copied().map(Target)
    }

    /// Number of compiled schema nodes.
    pub fn node_count(&self) -> usize {
        self.plan.nodes.len()
    }

    /// Whether `value` is valid against `target` (`false` also for a value whose validation
    /// runs into an [`EvalLimit`]: [`verdict`](FastSchema::verdict) tells the two apart).
    pub fn is_valid(&self, target: Target, value: &Value) -> bool {
        self.verdict(target, value) == Ok(true)
    }

    /// Whether `value` is valid against `target`, or the limit that stopped the validation
    /// before it could decide. A validation that fans out (the same subschema applied to the
    /// same value by many paths) is decided with each subschema's verdict on each value kept.
    pub fn verdict(&self, target: Target, value: &Value) -> Result<bool, EvalLimit> {
        let run = || eval::valid(&self.plan, target.0, value, 0);
        // Counting the values costs a walk of its own: only an instance that needs more than
        // the base budget pays for it (and only one that needs more than its whole budget pays
        // for the memo).
        match bounded(WALK_STEPS_BASE, run) {
            Err(EvalLimit::Steps) => decide(budget(count_values(value)), run),
            other => other,
        }
    }

    /// Whether a full report of `value` against `target` (every check of every branch, which
    /// the report pass visits) stays within the step budget.
    pub fn report_within_budget(&self, target: Target, value: &Value) -> Result<(), EvalLimit> {
        bounded(budget(count_values(value)), || {
            eval::walk_all(&self.plan, target.0, value, 0, &mut |_| {})
        })
    }

    /// [`report_within_budget`](FastSchema::report_within_budget), answering which of
    /// `pointers` (schema pointers) the report checks `value` against: `true` for each one
    /// whose schema the walk visits, in place or through references (chains of `$ref`-only
    /// schemas included), and for each one the plan did not compile.
    pub(crate) fn report_reaches(
        &self,
        target: Target,
        value: &Value,
        pointers: &[String],
    ) -> Result<Vec<bool>, EvalLimit> {
        let nodes = &self.plan.nodes;
        let mut visited = vec![false; nodes.len()];
        bounded(budget(count_values(value)), || {
            eval::walk_all(&self.plan, target.0, value, 0, &mut |start| {
                let mut at = start;
                while !visited[at as usize] {
                    visited[at as usize] = true;
                    let node = &nodes[at as usize];
                    match node.checks.as_slice() {
                        [plan::Check::Ref(next)] if node.types == plan::T_ANY => at = *next,
                        _ => break,
                    }
                }
            })
        })?;
        Ok(pointers
            .iter()
            .map(|p| {
                self.plan
                    .by_pointer
                    .get(p)
                    .is_none_or(|n| visited[*n as usize])
            })
            .collect())
    }

    /// The instance path of the first error, in the order AJV (`allErrors: false`) reports
    /// errors, or `None` when `value` is valid. A validation stopped by a limit reports the
    /// root.
    pub fn first_error_path(&self, target: Target, value: &Value) -> Option<String> {
        match self.verdict(target, value) {
            Ok(true) => return None,
            Ok(false) => {}
            Err(_) => return Some(String::new()),
        }
        let steps = budget(count_values(value));
        decide(steps, || {
            eval::first_error(&self.plan, target.0, value, "", 0)
        })
        .map_or(Some(String::new()), |e| Some(e.unwrap_or_default()))
    }

    /// Parses `bytes` (with the rules of [`crate::parse_json`]) and validates the document
    /// against `target`.
    pub fn check_bytes(
        &self,
        target: Target,
        bytes: &[u8],
        tape: &mut Tape,
    ) -> Result<bool, JsonError> {
        Ok(parse(bytes, tape)?.is_valid(self, target))
    }
}

/// A document read for validation: on the tape when the fast reader took it, as a value when
/// the strict parser had to decide.
#[derive(Debug)]
pub struct Parsed<'a> {
    inner: Inner<'a>,
}

#[derive(Debug)]
enum Inner<'a> {
    Tape { tape: &'a Tape, text: &'a str },
    Value(Value),
}

/// Reads one JSON document with the rules of [`crate::parse_json`] (same acceptance, same
/// errors), into `tape` when it can.
pub fn parse<'a>(bytes: &'a [u8], tape: &'a mut Tape) -> Result<Parsed<'a>, JsonError> {
    if let Ok(text) = simdutf8::basic::from_utf8(bytes)
        && tape.parse(text).is_ok()
    {
        return Ok(Parsed {
            inner: Inner::Tape { tape, text },
        });
    }
    json::parse_json(bytes).map(|v| Parsed {
        inner: Inner::Value(v),
    })
}

impl Parsed<'_> {
    /// Whether the whole document is valid against `target`.
    pub fn is_valid(&self, schema: &FastSchema, target: Target) -> bool {
        self.is_valid_at(schema, target, "").unwrap_or(false)
    }

    /// Whether the value at JSON Pointer `ptr` inside the document is valid against `target`;
    /// `None` when nothing is there.
    pub fn is_valid_at(&self, schema: &FastSchema, target: Target, ptr: &str) -> Option<bool> {
        self.verdict_at(schema, target, ptr).map(|v| v == Ok(true))
    }

    /// [`Parsed::is_valid_at`], with the limit that stopped the validation if one did.
    pub fn verdict_at(
        &self,
        schema: &FastSchema,
        target: Target,
        ptr: &str,
    ) -> Option<Result<bool, EvalLimit>> {
        match &self.inner {
            Inner::Tape { tape, text } => {
                let v = tape.root(text).pointer(ptr)?;
                let steps = budget(tape.toks.len());
                Some(decide(steps, || eval::valid(&schema.plan, target.0, v, 0)))
            }
            Inner::Value(value) => Some(schema.verdict(target, pointer::resolve(value, ptr)?)),
        }
    }

    /// The document as a value (built from the tape when needed).
    pub fn to_value(&self) -> Value {
        match &self.inner {
            Inner::Tape { tape, text } => to_value(tape.root(text)),
            Inner::Value(v) => v.clone(),
        }
    }
}

fn to_value<'a, I: Instance<'a>>(i: I) -> Value {
    match i.kind() {
        Kind::Null => Value::Null,
        Kind::Bool => Value::Bool(i.as_bool()),
        Kind::Number => {
            let f = i.as_f64();
            if f.fract() == 0.0 && f.abs() < 9.007_199_254_740_992e15 {
                Value::from(f as i64)
            } else {
                serde_json::Number::from_f64(f).map_or(Value::Null, Value::Number)
            }
        }
        Kind::String => Value::String(i.as_str().to_owned()),
        Kind::Array => Value::Array(i.items().map(to_value).collect()),
        Kind::Object => Value::Object(
            i.entries()
                .map(|(k, v)| (k.to_owned(), to_value(v)))
                .collect(),
        ),
    }
}
