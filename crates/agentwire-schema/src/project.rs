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
    self, MAP_DOWN, VERSION_CONST, VersionError, VersionRange, ViewMode, ViewTrace, WireVersion,
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
    /// Where each node of the `from` view came from in the document.
    from_trace: ViewTrace,
    /// The `to` view with its annotations kept: walked after a variant is mapped with `as`.
    to_view: Value,
    /// Document pointer → pointer in the `to` view.
    to_by_origin: HashMap<String, String>,
    to_compiler: ValidatorCompiler,
    /// Pointer of the target in the view.
    target: String,
    from_compiler: ValidatorCompiler,
    from_validator: Validator,
    to_validator: Validator,
    /// Validators of union branches of the `from` export, compiled on first use.
    branches: RefCell<HashMap<String, Option<Validator>>>,
    /// Validators of union branches of the `to` export, compiled on first use.
    to_branches: RefCell<HashMap<String, Option<Validator>>>,
}

/// Which view a part of the message is walked against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Side {
    /// The `from` view: nodes may not exist in `to`.
    From,
    /// The `to` view, after a variant was mapped with `as`: every node exists in `to`.
    To,
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
        let (view, from_trace) = versions::view_traced(doc, &from, ViewMode::Annotated, true)?;
        let (to_view, to_trace) = versions::view_traced(doc, &to, ViewMode::Annotated, true)?;
        let to_by_origin = to_trace
            .into_iter()
            .map(|(view_at, origin)| (origin, view_at))
            .collect();
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
            from_trace,
            to_view,
            to_by_origin,
            to_compiler,
            target,
            from_compiler,
            from_validator,
            to_validator,
            branches: RefCell::new(HashMap::new()),
            to_branches: RefCell::new(HashMap::new()),
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
        let projected = walk.node(
            schema,
            &self.target,
            message.clone(),
            message,
            "",
            0,
            Side::From,
        )?;
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

    fn branch_matches(&self, side: Side, branch_ptr: &str, value: &Value) -> bool {
        let (cache, compiler) = match side {
            Side::From => (&self.branches, &self.from_compiler),
            Side::To => (&self.to_branches, &self.to_compiler),
        };
        let mut cache = cache.borrow_mut();
        let validator = cache
            .entry(branch_ptr.to_owned())
            .or_insert_with(|| compiler.at_pointer(branch_ptr).ok());
        validator.as_ref().is_some_and(|v| v.is_valid(value))
    }

    /// The node of the `to` view that comes from the same place in the document as the node of
    /// the `from` view at `from_at`.
    fn to_counterpart(&self, from_at: &str) -> Option<&Value> {
        let origin = self.from_trace.get(from_at)?;
        let to_at = self.to_by_origin.get(origin)?;
        pointer::resolve(&self.to_view, to_at)
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
    /// `at` in the view of `side`; `msg` is the message pointer.
    #[allow(clippy::too_many_arguments)] // one walk state, spelled out to keep borrows simple
    fn node(
        &self,
        node: &Value,
        at: &str,
        value: Value,
        original: &Value,
        msg: &str,
        depth: usize,
        side: Side,
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
            let (target_at, target) = self.resolve(side, at, reference, msg)?;
            if side == Side::From && !self.exists_in_target(target, &target_at, 0)? {
                return self.mapped_variant(
                    &[node, target],
                    value,
                    original,
                    msg,
                    depth,
                    &target_at,
                );
            }
            value = self.node(target, &target_at, value, original, msg, depth + 1, side)?;
        }
        if let Some(Value::Array(parts)) = map.get("allOf") {
            for (i, part) in parts.iter().enumerate() {
                let part_at = format!("{}/{i}", pointer::push(at, "allOf"));
                value = self.node(part, &part_at, value, original, msg, depth + 1, side)?;
            }
        }
        for key in ["oneOf", "anyOf"] {
            let Some(Value::Array(branches)) = map.get(key) else {
                continue;
            };
            let base = pointer::push(at, key);
            value = match side {
                Side::From => {
                    let chosen = branches.iter().enumerate().find(|(i, _)| {
                        self.projector
                            .branch_matches(Side::From, &format!("{base}/{i}"), original)
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
                        let mut carriers = vec![branch];
                        if let Some(Value::String(r)) = branch.get("$ref") {
                            carriers.push(self.resolve(side, &branch_at, r, msg)?.1);
                        }
                        return self
                            .mapped_variant(&carriers, value, original, msg, depth, &branch_at);
                    }
                    self.node(branch, &branch_at, value, original, msg, depth + 1, side)?
                }
                // In the target's view the first branch the projected value fits is its variant.
                Side::To => {
                    let mut fitted = None;
                    for (i, branch) in branches.iter().enumerate() {
                        let branch_at = format!("{base}/{i}");
                        let Ok(candidate) = self.node(
                            branch,
                            &branch_at,
                            value.clone(),
                            original,
                            msg,
                            depth + 1,
                            side,
                        ) else {
                            continue;
                        };
                        if self
                            .projector
                            .branch_matches(Side::To, &branch_at, &candidate)
                        {
                            fitted = Some(candidate);
                            break;
                        }
                    }
                    fitted.ok_or_else(|| {
                        ProjectError::new(
                            ProjectErrorKind::VariantUnavailable,
                            msg,
                            format!(
                                "the message fits no branch of {base} in version {}",
                                self.to()
                            ),
                        )
                    })?
                }
            };
        }
        match value {
            Value::Object(object) => self.object(map, at, object, original, msg, depth, side),
            Value::Array(items) => self.array(map, at, items, original, msg, depth, side),
            scalar => self.scalar(map, at, scalar, msg, side),
        }
    }

    /// A variant that does not exist in the target: continues as the schema an
    /// `x-agentwire-map-down` entry `{"below", "as"}` on one of `carriers` names, in the target's
    /// view, or fails.
    fn mapped_variant(
        &self,
        carriers: &[&Value],
        value: Value,
        original: &Value,
        msg: &str,
        depth: usize,
        variant_at: &str,
    ) -> Result<Value, ProjectError> {
        let mut best: Option<(WireVersion, String)> = None;
        for carrier in carriers {
            let Some(Value::Array(entries)) = carrier.get(MAP_DOWN) else {
                continue;
            };
            for entry in entries {
                let (Some(below), Some(Value::String(target))) =
                    (entry.get("below"), entry.get("as"))
                else {
                    continue;
                };
                let below = WireVersion::from_json(below).map_err(|e| {
                    ProjectError::new(
                        ProjectErrorKind::Version,
                        "",
                        format!("{variant_at}: {}", e.message),
                    )
                })?;
                if *self.to() < below && best.as_ref().is_none_or(|(b, _)| below < *b) {
                    best = Some((below, target.clone()));
                }
            }
        }
        let Some((_, target)) = best else {
            return Err(self.unavailable(msg, variant_at));
        };
        let (target_at, node) = self.resolve(Side::To, variant_at, &target, msg)?;
        self.node(node, &target_at, value, original, msg, depth + 1, Side::To)
    }

    #[allow(clippy::too_many_arguments)]
    fn object(
        &self,
        map: &Map<String, Value>,
        at: &str,
        object: Map<String, Value>,
        original: &Value,
        msg: &str,
        depth: usize,
        side: Side,
    ) -> Result<Value, ProjectError> {
        let properties = map.get("properties").and_then(Value::as_object);
        let additional = map.get("additionalProperties");
        // Keyword overrides can give the target a different, closed set of properties.
        let target_node = match side {
            Side::From => self.projector.to_counterpart(at).and_then(Value::as_object),
            Side::To => Some(map),
        };
        let target_closed = target_node.is_some_and(|t| {
            t.get("additionalProperties") == Some(&Value::Bool(false))
                && !t.contains_key("patternProperties")
        });
        let target_properties = target_node
            .and_then(|t| t.get("properties"))
            .and_then(Value::as_object);
        let mut out = Map::with_capacity(object.len());
        for (key, child) in object {
            if target_closed && !target_properties.is_some_and(|p| p.contains_key(&key)) {
                continue;
            }
            let (schema, schema_at) = match properties.and_then(|p| p.get(&key)) {
                Some(s) => (s, pointer::push(&pointer::push(at, "properties"), &key)),
                None => match additional {
                    Some(s) if s.is_object() => (s, pointer::push(at, "additionalProperties")),
                    _ => {
                        out.insert(key, child);
                        continue;
                    }
                },
            };
            if side == Side::From && !self.exists_in_target(schema, &schema_at, 0)? {
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
                side,
            )?;
            out.insert(key, projected);
        }
        Ok(Value::Object(out))
    }

    #[allow(clippy::too_many_arguments)]
    fn array(
        &self,
        map: &Map<String, Value>,
        at: &str,
        items: Vec<Value>,
        original: &Value,
        msg: &str,
        depth: usize,
        side: Side,
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
                side,
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
        side: Side,
    ) -> Result<Value, ProjectError> {
        if map.get(VERSION_CONST) == Some(&Value::Bool(true)) {
            return Ok(Value::String(self.to().as_str().to_owned()));
        }
        if let Some(entries) = map.get(MAP_DOWN) {
            value = self.map_down(entries, at, value)?;
        }
        // In the target's view the enum is already the target's own; in the source's view its
        // values still carry their ranges.
        let exists = match (side, map.get("enum")) {
            (_, None) => true,
            (Side::To, Some(Value::Array(values))) => values.contains(&value),
            (_, Some(_)) => versions::enum_value_in_map(map, &value, self.to())?,
        };
        if !exists {
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
            // `{"below", "as"}` entries map variants, not values.
            if entry.get("as").is_some() {
                continue;
            }
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
        side: Side,
        at: &str,
        reference: &str,
        msg: &str,
    ) -> Result<(String, &'v Value), ProjectError> {
        let view = match side {
            Side::From => &self.projector.view,
            Side::To => &self.projector.to_view,
        };
        let target = reference
            .split_once('#')
            .map(|(_, f)| f)
            .and_then(pointer::percent_decode)
            .filter(|t| t.is_empty() || t.starts_with('/'));
        match target
            .as_deref()
            .and_then(|t| pointer::resolve(view, t).map(|v| (t, v)))
        {
            Some((t, v)) => Ok((t.to_owned(), v)),
            None => Err(ProjectError::new(
                if side == Side::To {
                    ProjectErrorKind::VariantUnavailable
                } else {
                    ProjectErrorKind::Version
                },
                msg,
                format!(
                    "{reference:?} at {at} does not resolve in the view of {}",
                    match side {
                        Side::From => &self.projector.from,
                        Side::To => &self.projector.to,
                    }
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
            let (target_at, target) = self.resolve(Side::From, at, reference, "")?;
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
