//! Down-projection: rewriting a message of one wire version into what a peer of an older
//! version understands, exactly as the version annotations say (docs/versions.md), and checking
//! that the result validates under the older version's export.

use std::cell::RefCell;
use std::collections::HashMap;
use std::fmt;

use serde_json::{Map, Value};

use crate::document::SchemaDocument;
use crate::pointer;
use crate::validate::{Validator, ValidatorCompiler};
use crate::versions::{
    self, MAP_DOWN, VERSION_CONST, VersionError, VersionRange, ViewMode, WireVersion,
};

/// Most nested schema levels (message nesting plus followed references) projection walks.
pub const MAX_PROJECT_DEPTH: usize = 256;

/// What a projection targets: the whole document or one named definition.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ProjectTarget<'a> {
    /// The document's root schema.
    Root,
    /// One definition, by name.
    Definition(&'a str),
}

/// Why a message cannot be projected.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum ProjectErrorKind {
    /// A version is unknown or malformed, or the schema's annotations are wrong.
    Version,
    /// `to` is newer than `from`.
    NotDownward,
    /// The target definition does not exist in one of the versions.
    UnknownDefinition,
    /// The message does not validate under the `from` version.
    InvalidSource,
    /// The message's variant (a union branch or a definition) does not exist in `to` and nothing
    /// maps it.
    VariantUnavailable,
    /// An enum or const value does not exist in `to` and no `x-agentwire-map-down` maps it.
    ValueUnavailable,
    /// After stripping and mapping, the message still does not validate under `to` (a keyword
    /// override tightened something the annotations cannot repair).
    NotValidInTarget,
    /// The message nests deeper than [`MAX_PROJECT_DEPTH`].
    TooDeep,
}

impl ProjectErrorKind {
    /// Stable code of the error.
    pub fn code(self) -> &'static str {
        match self {
            ProjectErrorKind::Version => "project.version",
            ProjectErrorKind::NotDownward => "project.not-downward",
            ProjectErrorKind::UnknownDefinition => "project.unknown-definition",
            ProjectErrorKind::InvalidSource => "project.invalid-source",
            ProjectErrorKind::VariantUnavailable => "project.variant-unavailable",
            ProjectErrorKind::ValueUnavailable => "project.value-unavailable",
            ProjectErrorKind::NotValidInTarget => "project.not-valid-in-target",
            ProjectErrorKind::TooDeep => "project.too-deep",
        }
    }
}

/// A message that cannot be projected, with the JSON Pointer of the culprit in the message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProjectError {
    /// What went wrong.
    pub kind: ProjectErrorKind,
    /// JSON Pointer into the message (empty for the whole message or for setup errors).
    pub pointer: String,
    /// A sentence a person understands.
    pub message: String,
}

impl ProjectError {
    fn new(kind: ProjectErrorKind, pointer: impl Into<String>, message: String) -> Self {
        ProjectError {
            kind,
            pointer: pointer.into(),
            message,
        }
    }

    /// Stable code of the error.
    pub fn code(&self) -> &'static str {
        self.kind.code()
    }
}

impl fmt::Display for ProjectError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.pointer.is_empty() {
            write!(f, "{}: {}", self.code(), self.message)
        } else {
            write!(f, "{} at {}: {}", self.code(), self.pointer, self.message)
        }
    }
}

impl std::error::Error for ProjectError {}

impl From<VersionError> for ProjectError {
    fn from(err: VersionError) -> Self {
        ProjectError::new(ProjectErrorKind::Version, "", err.to_string())
    }
}

/// Projects one message (see [`Projector`]).
pub fn project(
    doc: &SchemaDocument,
    message: &Value,
    from: &str,
    to: &str,
    target: ProjectTarget<'_>,
) -> Result<Value, ProjectError> {
    Projector::new(doc, from, to, target)?.project(message)
}

/// Projects messages of version `from` down to version `to`; build once, project many.
pub struct Projector {
    from: WireVersion,
    to: WireVersion,
    /// The `from` view with its annotations kept: the schema the message is walked against.
    view: Value,
    /// Pointer of the target in the view.
    target: String,
    from_compiler: ValidatorCompiler,
    from_validator: Validator,
    to_validator: Validator,
    /// Validators of union branches of the `from` export, compiled on first use.
    branches: RefCell<HashMap<String, Option<Validator>>>,
}

impl fmt::Debug for Projector {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Projector")
            .field("from", &self.from.as_str())
            .field("to", &self.to.as_str())
            .field("target", &self.target)
            .finish_non_exhaustive()
    }
}

impl Projector {
    /// Prepares the views and validators of both versions.
    pub fn new(
        doc: &SchemaDocument,
        from: &str,
        to: &str,
        target: ProjectTarget<'_>,
    ) -> Result<Projector, ProjectError> {
        let from = versions::known_version(doc, from)?;
        let to = versions::known_version(doc, to)?;
        if to > from {
            return Err(ProjectError::new(
                ProjectErrorKind::NotDownward,
                "",
                format!("projection goes down only: {to} is newer than {from}"),
            ));
        }
        let view = versions::view(doc, &from, ViewMode::Annotated)?;
        let from_doc = load_export(versions::export_version(doc, from.as_str())?)?;
        let to_doc = load_export(versions::export_version(doc, to.as_str())?)?;
        let setup = |e: crate::document::SchemaError| {
            ProjectError::new(ProjectErrorKind::UnknownDefinition, "", e.to_string())
        };
        let from_compiler = ValidatorCompiler::new(&from_doc).map_err(setup)?;
        let to_compiler = ValidatorCompiler::new(&to_doc).map_err(setup)?;
        let (target, from_validator, to_validator) = match target {
            ProjectTarget::Root => (
                String::new(),
                from_compiler.root().map_err(setup)?,
                to_compiler.root().map_err(setup)?,
            ),
            ProjectTarget::Definition(name) => {
                let missing = |v: &WireVersion| {
                    ProjectError::new(
                        ProjectErrorKind::UnknownDefinition,
                        "",
                        format!("version {v} has no definition named {name:?}"),
                    )
                };
                let ptr = from_doc
                    .definition_pointer(name)
                    .map_err(|_| missing(&from))?;
                let to_validator = to_compiler.definition(name).map_err(|_| missing(&to))?;
                (
                    ptr,
                    from_compiler.definition(name).map_err(setup)?,
                    to_validator,
                )
            }
        };
        Ok(Projector {
            from,
            to,
            view,
            target,
            from_compiler,
            from_validator,
            to_validator,
            branches: RefCell::new(HashMap::new()),
        })
    }

    /// The version messages are projected from.
    pub fn from_version(&self) -> &WireVersion {
        &self.from
    }

    /// The version messages are projected to.
    pub fn to_version(&self) -> &WireVersion {
        &self.to
    }

    /// Projects one message: validates it under `from`, strips and maps what the annotations
    /// say, and checks the result under `to`.
    pub fn project(&self, message: &Value) -> Result<Value, ProjectError> {
        let issues = self.from_validator.validate(message);
        if let Some(first) = issues.first() {
            return Err(ProjectError::new(
                ProjectErrorKind::InvalidSource,
                first.instance_pointer.clone(),
                format!(
                    "the message is not valid in version {}: {}",
                    self.from, first.message
                ),
            ));
        }
        let schema = pointer::resolve(&self.view, &self.target).unwrap_or(&Value::Bool(true));
        let walk = Walk { projector: self };
        let projected = walk.node(schema, &self.target, message.clone(), message, "", 0)?;
        let issues = self.to_validator.validate(&projected);
        if let Some(first) = issues.first() {
            return Err(ProjectError::new(
                ProjectErrorKind::NotValidInTarget,
                first.instance_pointer.clone(),
                format!(
                    "after projection the message is still not valid in version {}: {}",
                    self.to, first.message
                ),
            ));
        }
        Ok(projected)
    }

    fn branch_matches(&self, branch_ptr: &str, value: &Value) -> bool {
        let mut cache = self.branches.borrow_mut();
        let validator = cache
            .entry(branch_ptr.to_owned())
            .or_insert_with(|| self.from_compiler.at_pointer(branch_ptr).ok());
        validator.as_ref().is_some_and(|v| v.is_valid(value))
    }
}

fn load_export(value: Value) -> Result<SchemaDocument, ProjectError> {
    SchemaDocument::from_value(value)
        .map_err(|e| ProjectError::new(ProjectErrorKind::Version, "", e.to_string()))
}

struct Walk<'p> {
    projector: &'p Projector,
}

impl Walk<'_> {
    fn to(&self) -> &WireVersion {
        &self.projector.to
    }

    /// Projects `value` (whose untouched original is `original`) through the schema `node` at
    /// `at` in the `from` view; `msg` is the message pointer.
    fn node(
        &self,
        node: &Value,
        at: &str,
        value: Value,
        original: &Value,
        msg: &str,
        depth: usize,
    ) -> Result<Value, ProjectError> {
        if depth > MAX_PROJECT_DEPTH {
            return Err(ProjectError::new(
                ProjectErrorKind::TooDeep,
                msg,
                format!("the message nests deeper than {MAX_PROJECT_DEPTH} schema levels"),
            ));
        }
        let Value::Object(map) = node else {
            return Ok(value);
        };
        let mut value = value;
        if let Some(Value::String(reference)) = map.get("$ref") {
            let (target_at, target) = self.resolve(at, reference, msg)?;
            if !self.exists_in_target(target, &target_at, 0)? {
                return Err(self.unavailable(msg, &target_at));
            }
            value = self.node(target, &target_at, value, original, msg, depth + 1)?;
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            for (i, part) in parts.iter().enumerate() {
                let part_at = format!("{}/{i}", pointer::push(at, "allOf"));
                value = self.node(part, &part_at, value, original, msg, depth + 1)?;
            }
        }
        for key in ["oneOf", "anyOf"] {
            let Some(Value::Array(branches)) = map.get(key) else {
                continue;
            };
            let base = pointer::push(at, key);
            let chosen = branches.iter().enumerate().find(|(i, _)| {
                self.projector
                    .branch_matches(&format!("{base}/{i}"), original)
            });
            let Some((i, branch)) = chosen else {
                return Err(ProjectError::new(
                    ProjectErrorKind::InvalidSource,
                    msg,
                    format!("no branch of {base} matches the message"),
                ));
            };
            let branch_at = format!("{base}/{i}");
            if !self.exists_in_target(branch, &branch_at, 0)? {
                return Err(self.unavailable(msg, &branch_at));
            }
            value = self.node(branch, &branch_at, value, original, msg, depth + 1)?;
        }
        match value {
            Value::Object(object) => self.object(map, at, object, original, msg, depth),
            Value::Array(items) => self.array(map, at, items, original, msg, depth),
            scalar => self.scalar(map, at, scalar, msg),
        }
    }

    fn object(
        &self,
        map: &Map<String, Value>,
        at: &str,
        object: Map<String, Value>,
        original: &Value,
        msg: &str,
        depth: usize,
    ) -> Result<Value, ProjectError> {
        let properties = map.get("properties").and_then(Value::as_object);
        let additional = map.get("additionalProperties").filter(|v| v.is_object());
        let mut out = Map::with_capacity(object.len());
        for (key, child) in object {
            let (schema, schema_at) = match properties.and_then(|p| p.get(&key)) {
                Some(s) => (s, pointer::push(&pointer::push(at, "properties"), &key)),
                None => match additional {
                    Some(s) => (s, pointer::push(at, "additionalProperties")),
                    None => {
                        out.insert(key, child);
                        continue;
                    }
                },
            };
            if !self.exists_in_target(schema, &schema_at, 0)? {
                continue;
            }
            let child_original = original.get(&key).unwrap_or(&Value::Null);
            let child_msg = pointer::push(msg, &key);
            let projected = self.node(
                schema,
                &schema_at,
                child,
                child_original,
                &child_msg,
                depth + 1,
            )?;
            out.insert(key, projected);
        }
        Ok(Value::Object(out))
    }

    fn array(
        &self,
        map: &Map<String, Value>,
        at: &str,
        items: Vec<Value>,
        original: &Value,
        msg: &str,
        depth: usize,
    ) -> Result<Value, ProjectError> {
        let prefix = map.get("prefixItems").and_then(Value::as_array);
        let rest = map.get("items").filter(|v| v.is_object());
        let mut out = Vec::with_capacity(items.len());
        for (i, item) in items.into_iter().enumerate() {
            let (schema, schema_at) = match prefix.and_then(|p| p.get(i)) {
                Some(s) => (s, format!("{}/{i}", pointer::push(at, "prefixItems"))),
                None => match rest {
                    Some(s) => (s, pointer::push(at, "items")),
                    None => {
                        out.push(item);
                        continue;
                    }
                },
            };
            let child_original = original.get(i).unwrap_or(&Value::Null);
            let child_msg = format!("{msg}/{i}");
            out.push(self.node(
                schema,
                &schema_at,
                item,
                child_original,
                &child_msg,
                depth + 1,
            )?);
        }
        Ok(Value::Array(out))
    }

    fn scalar(
        &self,
        map: &Map<String, Value>,
        at: &str,
        mut value: Value,
        msg: &str,
    ) -> Result<Value, ProjectError> {
        if map.get(VERSION_CONST) == Some(&Value::Bool(true)) {
            return Ok(Value::String(self.to().as_str().to_owned()));
        }
        if let Some(entries) = map.get(MAP_DOWN) {
            value = self.map_down(entries, at, value)?;
        }
        if map.contains_key("enum") && !versions::enum_value_in_map(map, &value, self.to())? {
            return Err(ProjectError::new(
                ProjectErrorKind::ValueUnavailable,
                msg,
                format!(
                    "value {value} does not exist in version {} and {} does not map it",
                    self.to(),
                    pointer::push(at, MAP_DOWN)
                ),
            ));
        }
        Ok(value)
    }

    /// Applies every `x-agentwire-map-down` entry whose `below` is above the target version,
    /// from the newest boundary down, so chained renames compose.
    fn map_down(&self, entries: &Value, at: &str, value: Value) -> Result<Value, ProjectError> {
        let here = pointer::push(at, MAP_DOWN);
        let bad =
            |why: &str| ProjectError::new(ProjectErrorKind::Version, "", format!("{here}: {why}"));
        let Value::Array(entries) = entries else {
            return Err(bad("must be an array of {below, map}"));
        };
        let mut steps: Vec<(WireVersion, &Map<String, Value>)> = Vec::with_capacity(entries.len());
        for entry in entries {
            let below = entry
                .get("below")
                .ok_or_else(|| bad("an entry needs \"below\""))?;
            let below = WireVersion::from_json(below).map_err(|e| bad(&e.message))?;
            let Some(Value::Object(table)) = entry.get("map") else {
                return Err(bad("an entry needs a \"map\" object"));
            };
            steps.push((below, table));
        }
        steps.sort_by(|a, b| b.0.cmp(&a.0));
        let mut value = value;
        for (below, table) in steps {
            if *self.to() >= below {
                continue;
            }
            if let Value::String(text) = &value
                && let Some(mapped) = table.get(text)
            {
                value = mapped.clone();
            }
        }
        Ok(value)
    }

    fn resolve<'v>(
        &'v self,
        at: &str,
        reference: &str,
        msg: &str,
    ) -> Result<(String, &'v Value), ProjectError> {
        let target = reference
            .split_once('#')
            .map(|(_, f)| f)
            .and_then(pointer::percent_decode)
            .filter(|t| t.is_empty() || t.starts_with('/'));
        match target
            .as_deref()
            .and_then(|t| pointer::resolve(&self.projector.view, t).map(|v| (t, v)))
        {
            Some((t, v)) => Ok((t.to_owned(), v)),
            None => Err(ProjectError::new(
                ProjectErrorKind::Version,
                msg,
                format!(
                    "{reference:?} at {at} does not resolve in the view of {}",
                    self.projector.from
                ),
            )),
        }
    }

    /// Whether a node of the `from` view still exists in the target version: its own range, and
    /// the range of the definitions it references.
    fn exists_in_target(&self, node: &Value, at: &str, hops: usize) -> Result<bool, ProjectError> {
        if !VersionRange::of_node(node)
            .map_err(|e| self.annotation_error(at, e))?
            .contains(self.to())
        {
            return Ok(false);
        }
        if hops < MAX_PROJECT_DEPTH
            && let Some(Value::String(reference)) = node.get("$ref")
        {
            let (target_at, target) = self.resolve(at, reference, "")?;
            return self.exists_in_target(target, &target_at, hops + 1);
        }
        Ok(true)
    }

    fn annotation_error(&self, at: &str, err: VersionError) -> ProjectError {
        ProjectError::new(ProjectErrorKind::Version, "", format!("{at}: {err}"))
    }

    fn unavailable(&self, msg: &str, schema_at: &str) -> ProjectError {
        ProjectError::new(
            ProjectErrorKind::VariantUnavailable,
            msg,
            format!(
                "the message's variant {schema_at} does not exist in version {}",
                self.to()
            ),
        )
    }
}
