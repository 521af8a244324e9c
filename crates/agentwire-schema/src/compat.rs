//! The compatibility checker: compares an old and a new schema document and classifies every
//! change as breaking or additive, taking into account which side receives each message
//! (`x-agentwire-direction`) and whether the receiver tolerates unknown members
//! (`x-agentwire-open`). Rules and their classes are listed in docs/compat.md.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value, json};

use crate::document::SchemaDocument;
use crate::identity::{AGENTWIRE_IDENTITY, IdentitySource};
use crate::pointer;
use crate::versions::{self, ANNOTATION_PREFIX, ViewMode, WireVersion};

/// Most nested comparisons (schema nesting plus followed references) before the checker gives
/// up on a branch and reports it as a breaking `comparison-too-deep` change.
pub const MAX_COMPARE_DEPTH: usize = 512;
/// Stack of the thread the comparison runs on: room for [`MAX_COMPARE_DEPTH`] nested levels.
pub const COMPARE_STACK_BYTES: usize = 64 * 1024 * 1024;
/// Depth limit used when no comparison thread can be started and the caller's stack is used.
pub const MAX_COMPARE_DEPTH_INLINE: usize = 48;

/// `x-agentwire-direction`: who receives instances of a node.
pub const DIRECTION: &str = "x-agentwire-direction";
/// `x-agentwire-open`: receivers tolerate unknown properties, enum values or variants.
pub const OPEN: &str = "x-agentwire-open";

/// Who receives (validates) the instances of a schema node.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Direction {
    /// Sent by the host, received by the runtime.
    HostToRuntime,
    /// Sent by the runtime, received by the host.
    RuntimeToHost,
    /// Received by both sides.
    Both,
    /// Nothing says: judged as ChainlessChain's checker judges every change (tightening is
    /// breaking, additions are additive), see docs/compat.md.
    Unspecified,
}

impl Direction {
    /// The annotation value (`host-to-runtime`, `runtime-to-host`, `both`, `unspecified`).
    pub fn id(self) -> &'static str {
        match self {
            Direction::HostToRuntime => "host-to-runtime",
            Direction::RuntimeToHost => "runtime-to-host",
            Direction::Both => "both",
            Direction::Unspecified => "unspecified",
        }
    }

    /// Parses an annotation or command-line value.
    pub fn parse(text: &str) -> Option<Direction> {
        match text {
            "host-to-runtime" => Some(Direction::HostToRuntime),
            "runtime-to-host" => Some(Direction::RuntimeToHost),
            "both" => Some(Direction::Both),
            "unspecified" => Some(Direction::Unspecified),
            _ => None,
        }
    }

    fn receivers(self) -> Receivers {
        match self {
            Direction::HostToRuntime => Receivers::RUNTIME,
            Direction::RuntimeToHost => Receivers::HOST,
            Direction::Both => Receivers(Receivers::RUNTIME.0 | Receivers::HOST.0),
            Direction::Unspecified => Receivers::NONE,
        }
    }
}

impl fmt::Display for Direction {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.id())
    }
}

/// The set of receivers of a node, accumulated over every place it is reached from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
struct Receivers(u8);

impl Receivers {
    const NONE: Receivers = Receivers(0);
    const RUNTIME: Receivers = Receivers(1);
    const HOST: Receivers = Receivers(2);

    fn union(self, other: Receivers) -> Receivers {
        Receivers(self.0 | other.0)
    }

    fn direction(self, default: Direction) -> Direction {
        match self.0 {
            1 => Direction::HostToRuntime,
            2 => Direction::RuntimeToHost,
            3 => Direction::Both,
            _ => default,
        }
    }
}

/// Whether a change breaks a peer that still speaks the old schema.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ChangeClass {
    /// A peer built against the old schema fails against one built against the new.
    Breaking,
    /// Old and new peers keep working together.
    Additive,
}

impl ChangeClass {
    /// `breaking` or `additive`.
    pub fn id(self) -> &'static str {
        match self {
            ChangeClass::Breaking => "breaking",
            ChangeClass::Additive => "additive",
        }
    }
}

/// What a change does to the set of instances a node accepts.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Effect {
    /// The new schema accepts less.
    Tightens,
    /// The new schema accepts more.
    Loosens,
    /// The new schema accepts a new member (property, enum value, variant) that a receiver
    /// marked open tolerates.
    Adds,
    /// A new member that is also required: the runtime demands it and a closed host rejects it.
    TightensAndAdds,
    /// Neither a subset nor a superset (or the generated bindings lose something).
    Incompatible,
    /// Nothing changes on the wire.
    Neutral,
}

macro_rules! rules {
    ($($variant:ident => $id:literal, $effect:ident, $doc:literal;)*) => {
        /// A compatibility rule: a stable id and what the change it detects does.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
        #[non_exhaustive]
        pub enum Rule {
            $(#[doc = $doc] $variant,)*
        }

        impl Rule {
            /// Every rule, in documentation order.
            pub const ALL: &'static [Rule] = &[$(Rule::$variant,)*];

            /// The stable id of the rule.
            pub fn id(self) -> &'static str {
                match self { $(Rule::$variant => $id,)* }
            }

            /// What a change of this kind does to the accepted instances.
            pub fn effect(self) -> Effect {
                match self { $(Rule::$variant => Effect::$effect,)* }
            }

            /// One sentence saying what the rule detects.
            pub fn description(self) -> &'static str {
                match self { $(Rule::$variant => $doc,)* }
            }
        }
    };
}

rules! {
    DefinitionRemoved => "definition-removed", Incompatible, "A named definition disappeared.";
    DefinitionAdded => "definition-added", Neutral, "A new named definition.";
    VersionRemoved => "version-removed", Incompatible, "A wire version the old document carried is gone.";
    SchemaRemoved => "schema-removed", Tightens, "A subschema became `false` (nothing matches).";
    SchemaRestored => "schema-restored", Loosens, "A `false` subschema became satisfiable.";
    SchemaConstrained => "schema-constrained", Tightens, "A subschema that accepted anything gained constraints.";
    SchemaUnconstrained => "schema-unconstrained", Loosens, "A subschema became `true` (accepts anything).";
    ConstraintChanged => "constraint-changed", Incompatible, "A keyword without a finer rule (not, if/then/else, contains, propertyNames, dependencies, tuple shape, a non-schema value) changed.";
    TypeNarrowed => "type-narrowed", Tightens, "`type` accepts fewer JSON types (or appeared).";
    TypeWidened => "type-widened", Loosens, "`type` accepts more JSON types (or disappeared).";
    TypeChanged => "type-changed", Incompatible, "`type` changed to an unrelated set of types.";
    ConstChanged => "const-changed", Incompatible, "`const` changed value.";
    ConstAdded => "const-added", Tightens, "A node gained `const`.";
    ConstRemoved => "const-removed", Loosens, "A node lost `const`.";
    EnumAdded => "enum-added", Tightens, "A node gained `enum`.";
    EnumRemoved => "enum-removed", Loosens, "A node lost `enum`.";
    EnumValueRemoved => "enum-value-removed", Tightens, "An `enum` (or `const`) value is no longer accepted.";
    EnumValueAdded => "enum-value-added", Adds, "A new `enum` value.";
    RequiredAdded => "required-added", Tightens, "An existing property became required.";
    RequiredRemoved => "required-removed", Loosens, "A property is no longer required.";
    PropertyRemoved => "property-removed", Incompatible, "A property disappeared from `properties`.";
    RequiredPropertyAdded => "required-property-added", TightensAndAdds, "A new property that is also required.";
    PropertyAdded => "property-added", Adds, "A new optional property.";
    AdditionalPropertiesClosed => "additional-properties-closed", Tightens, "`additionalProperties` (or `unevaluatedProperties`) became `false`.";
    AdditionalPropertiesOpened => "additional-properties-opened", Adds, "`additionalProperties` (or `unevaluatedProperties`) is no longer `false`.";
    PatternPropertiesChanged => "pattern-properties-changed", Incompatible, "A `patternProperties` entry was added or removed.";
    LowerBoundTightened => "lower-bound-tightened", Tightens, "minimum/exclusiveMinimum/minLength/minItems/minProperties/minContains appeared or rose.";
    LowerBoundLoosened => "lower-bound-loosened", Loosens, "A lower bound disappeared or fell.";
    UpperBoundTightened => "upper-bound-tightened", Tightens, "maximum/exclusiveMaximum/maxLength/maxItems/maxProperties/maxContains appeared or fell.";
    UpperBoundLoosened => "upper-bound-loosened", Loosens, "An upper bound disappeared or rose.";
    MultipleOfTightened => "multiple-of-tightened", Tightens, "`multipleOf` appeared or became a multiple of the old one.";
    MultipleOfLoosened => "multiple-of-loosened", Loosens, "`multipleOf` disappeared or became a divisor of the old one.";
    MultipleOfChanged => "multiple-of-changed", Incompatible, "`multipleOf` changed to an unrelated factor.";
    PatternAdded => "pattern-added", Tightens, "A string gained `pattern`.";
    PatternRemoved => "pattern-removed", Loosens, "A string lost `pattern`.";
    PatternChanged => "pattern-changed", Incompatible, "`pattern` changed.";
    FormatAdded => "format-added", Tightens, "A string gained `format`.";
    FormatRemoved => "format-removed", Loosens, "A string lost `format`.";
    FormatChanged => "format-changed", Incompatible, "`format` changed.";
    UniqueItemsAdded => "unique-items-added", Tightens, "An array now requires unique items.";
    UniqueItemsRemoved => "unique-items-removed", Loosens, "An array no longer requires unique items.";
    VariantRemoved => "variant-removed", Tightens, "A `oneOf`/`anyOf` branch disappeared.";
    VariantAdded => "variant-added", Adds, "A new `oneOf`/`anyOf` branch.";
    AllOfBranchAdded => "all-of-branch-added", Tightens, "A new `allOf` branch.";
    AllOfBranchRemoved => "all-of-branch-removed", Loosens, "An `allOf` branch disappeared.";
    RefRetargeted => "ref-retargeted", Incompatible, "A `$ref` now names another definition.";
    ComparisonTooDeep => "comparison-too-deep", Incompatible, "The comparison went deeper than MAX_COMPARE_DEPTH; judged breaking to fail closed.";
}

/// One difference between two schema documents.
#[derive(Debug, Clone, PartialEq)]
pub struct Change {
    /// The rule that detected it.
    pub rule: Rule,
    /// JSON Pointer of the node in the new document (in the old one for removals).
    pub pointer: String,
    /// The old value (keyword value, enum value, property schema), if any.
    pub old: Option<Value>,
    /// The new value, if any.
    pub new: Option<Value>,
    /// Breaking or additive, for the node's direction.
    pub class: ChangeClass,
    /// Who receives the node the change is in.
    pub direction: Direction,
    /// The wire version whose views were compared, for multi-version documents.
    pub version: Option<String>,
}

impl Change {
    /// The change as JSON: `{rule, class, direction, pointer, old?, new?, version?}`.
    pub fn to_json(&self) -> Value {
        let mut out = Map::new();
        out.insert("rule".to_owned(), json!(self.rule.id()));
        out.insert("class".to_owned(), json!(self.class.id()));
        out.insert("direction".to_owned(), json!(self.direction.id()));
        out.insert("pointer".to_owned(), json!(self.pointer));
        if let Some(v) = &self.version {
            out.insert("version".to_owned(), json!(v));
        }
        if let Some(v) = &self.old {
            out.insert("old".to_owned(), v.clone());
        }
        if let Some(v) = &self.new {
            out.insert("new".to_owned(), v.clone());
        }
        Value::Object(out)
    }
}

/// Every change found between two documents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CompatReport {
    /// The changes, root first, then definitions in the old document's order, then additions.
    pub changes: Vec<Change>,
}

impl CompatReport {
    /// True when no change is breaking.
    pub fn is_compatible(&self) -> bool {
        self.changes
            .iter()
            .all(|c| c.class == ChangeClass::Additive)
    }

    /// The breaking changes.
    pub fn breaking(&self) -> impl Iterator<Item = &Change> {
        self.changes
            .iter()
            .filter(|c| c.class == ChangeClass::Breaking)
    }

    /// The report as JSON: `{compatible, breaking, additive, changes}`.
    pub fn to_json(&self) -> Value {
        let breaking = self.breaking().count();
        json!({
            "compatible": breaking == 0,
            "breaking": breaking,
            "additive": self.changes.len() - breaking,
            "changes": self.changes.iter().map(Change::to_json).collect::<Vec<_>>(),
        })
    }
}

/// How to judge nodes that no direction annotation reaches.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct CompatOptions {
    /// Direction of nodes no annotation reaches. `None`: `both` when the new document has an
    /// `x-agentwire` identity block (our own documents), `unspecified` otherwise.
    pub default_direction: Option<Direction>,
}

/// Compares two documents with the default options.
pub fn compat(old: &SchemaDocument, new: &SchemaDocument) -> CompatReport {
    compat_with(old, new, &CompatOptions::default())
}

/// Compares two documents.
///
/// Documents that both carry several wire versions (`x-agentwire.versions`) are compared version
/// by version: the view of every old version is compared with the new document's view of the same
/// version, and an old version the new document lacks is a breaking `version-removed`.
pub fn compat_with(
    old: &SchemaDocument,
    new: &SchemaDocument,
    options: &CompatOptions,
) -> CompatReport {
    if old.value() == new.value() {
        return CompatReport::default();
    }
    // Deeply nested or long reference chains recurse deeply: run on a stack sized for the limit.
    std::thread::scope(|scope| {
        let spawned = std::thread::Builder::new()
            .name("agentwire-compat".to_owned())
            .stack_size(COMPARE_STACK_BYTES)
            .spawn_scoped(scope, || {
                compat_on_stack(old, new, options, MAX_COMPARE_DEPTH)
            });
        match spawned {
            Ok(handle) => match handle.join() {
                Ok(report) => report,
                Err(panic) => std::panic::resume_unwind(panic),
            },
            Err(_) => compat_on_stack(old, new, options, MAX_COMPARE_DEPTH_INLINE),
        }
    })
}

fn compat_on_stack(
    old: &SchemaDocument,
    new: &SchemaDocument,
    options: &CompatOptions,
    max_depth: usize,
) -> CompatReport {
    let default = options.default_direction.unwrap_or_else(|| {
        if new.value().get(AGENTWIRE_IDENTITY).is_some() {
            Direction::Both
        } else {
            Direction::Unspecified
        }
    });
    if let Some(report) = compat_versions(old, new, default, max_depth) {
        return report;
    }
    let mut report = CompatReport::default();
    compare_documents(
        old.value(),
        new.value(),
        default,
        None,
        max_depth,
        &mut report.changes,
    );
    report
}

/// Version-by-version comparison, when both documents declare versions and at least one
/// carries more than one.
fn compat_versions(
    old: &SchemaDocument,
    new: &SchemaDocument,
    default: Direction,
    max_depth: usize,
) -> Option<CompatReport> {
    let old_id = old.identity().ok()?;
    let new_id = new.identity().ok()?;
    if old_id.source != Some(IdentitySource::Agentwire)
        || new_id.source != Some(IdentitySource::Agentwire)
    {
        return None;
    }
    if old_id.versions.len() < 2 && new_id.versions.len() < 2 {
        return None;
    }
    let mut report = CompatReport::default();
    for version in &old_id.versions {
        let version_text = Some(version.as_str().to_owned());
        let Some(new_version) = new_id.versions.iter().find(|v| *v == version) else {
            report.changes.push(Change {
                rule: Rule::VersionRemoved,
                pointer: pointer::from_tokens([AGENTWIRE_IDENTITY, "versions"]),
                old: Some(json!(version.as_str())),
                new: None,
                class: ChangeClass::Breaking,
                direction: default,
                version: version_text,
            });
            continue;
        };
        match (view_of(old, version), view_of(new, new_version)) {
            (Ok(o), Ok(n)) => compare_documents(
                &o,
                &n,
                default,
                version_text,
                max_depth,
                &mut report.changes,
            ),
            // A view that cannot be built is compared as the raw document would be: fail closed.
            _ => compare_documents(
                old.value(),
                new.value(),
                default,
                version_text,
                max_depth,
                &mut report.changes,
            ),
        }
    }
    Some(report)
}

fn view_of(doc: &SchemaDocument, version: &WireVersion) -> Result<Value, versions::VersionError> {
    versions::view(doc, version, ViewMode::Annotated)
}

fn definitions_of(root: &Value) -> Option<(&'static str, &Map<String, Value>)> {
    for key in ["$defs", "definitions"] {
        if let Some(Value::Object(m)) = root.get(key) {
            return Some((key, m));
        }
    }
    None
}

fn compare_documents(
    old: &Value,
    new: &Value,
    default: Direction,
    version: Option<String>,
    max_depth: usize,
    out: &mut Vec<Change>,
) {
    let old_dirs = DirectionMap::build(old);
    let new_dirs = DirectionMap::build(new);
    let mut cmp = Comparer {
        old_root: old,
        new_root: new,
        old_dirs: &old_dirs,
        new_dirs: &new_dirs,
        default,
        version,
        max_depth,
        seen: HashSet::new(),
        out,
    };
    let root_dir = cmp.direction_at("", "", Receivers::NONE);
    cmp.node(old, new, "", "", root_dir, 0);
    let empty = Map::new();
    let (old_kw, old_defs) = definitions_of(old).unwrap_or(("$defs", &empty));
    let (new_kw, new_defs) = definitions_of(new).unwrap_or((old_kw, &empty));
    for (name, old_def) in old_defs {
        let old_at = pointer::from_tokens([old_kw, name.as_str()]);
        let Some(new_def) = new_defs.get(name) else {
            let dir = cmp.direction_at(&old_at, &old_at, Receivers::NONE);
            cmp.push(
                Rule::DefinitionRemoved,
                old_at,
                Some(old_def.clone()),
                None,
                dir,
                false,
            );
            continue;
        };
        let new_at = pointer::from_tokens([new_kw, name.as_str()]);
        let dir = cmp.direction_at(&old_at, &new_at, Receivers::NONE);
        cmp.node(old_def, new_def, &old_at, &new_at, dir, 0);
    }
    for (name, new_def) in new_defs {
        if !old_defs.contains_key(name) {
            let new_at = pointer::from_tokens([new_kw, name.as_str()]);
            let dir = cmp.direction_at(&new_at, &new_at, Receivers::NONE);
            cmp.push(
                Rule::DefinitionAdded,
                new_at,
                None,
                Some(new_def.clone()),
                dir,
                false,
            );
        }
    }
}

/// The receivers of every "entry" node of one document: the root, every definition, every
/// `$ref` target and every node annotated with `x-agentwire-direction`. A node's receivers are
/// its own annotation plus everything that reaches it (through nesting or references).
struct DirectionMap {
    receivers: HashMap<String, Receivers>,
}

impl DirectionMap {
    fn build(root: &Value) -> DirectionMap {
        let mut own: HashMap<String, Receivers> = HashMap::new();
        let mut entries: HashSet<String> = HashSet::new();
        entries.insert(String::new());
        if let Some((kw, defs)) = definitions_of(root) {
            for name in defs.keys() {
                entries.insert(pointer::from_tokens([kw, name.as_str()]));
            }
        }
        crate::walk::for_each_subschema(root, |at, schema| {
            let Value::Object(map) = schema else { return };
            if let Some(Value::String(d)) = map.get(DIRECTION)
                && let Some(dir) = Direction::parse(d)
            {
                own.insert(at.to_owned(), dir.receivers());
                entries.insert(at.to_owned());
            }
            if let Some(Value::String(r)) = map.get("$ref")
                && let Some(target) = local_ref_target(r)
            {
                entries.insert(target);
            }
        });
        if own.is_empty() {
            // Nothing is annotated: every node takes the default direction.
            return DirectionMap {
                receivers: HashMap::new(),
            };
        }
        // Edges: an entry reaches the entries nested in it (stopping at them) and the targets of
        // the references inside it.
        let mut edges: HashMap<String, Vec<String>> = HashMap::new();
        for entry in &entries {
            let Some(node) = pointer::resolve(root, entry) else {
                continue;
            };
            let mut targets = Vec::new();
            let mut stack: Vec<(String, &Value)> = vec![(entry.clone(), node)];
            while let Some((at, schema)) = stack.pop() {
                if at != *entry && entries.contains(&at) {
                    targets.push(at);
                    continue;
                }
                if let Some(Value::String(r)) = schema.get("$ref")
                    && let Some(t) = local_ref_target(r)
                {
                    targets.push(t);
                }
                crate::walk::subschemas(&at, schema, |child_at, child| {
                    let is_defs = child_at.starts_with(&pointer::push(&at, "$defs"))
                        || child_at.starts_with(&pointer::push(&at, "definitions"));
                    if !is_defs {
                        stack.push((child_at, child));
                    }
                });
            }
            edges.insert(entry.clone(), targets);
        }
        let mut receivers: HashMap<String, Receivers> = entries
            .iter()
            .map(|e| (e.clone(), own.get(e).copied().unwrap_or(Receivers::NONE)))
            .collect();
        let mut work: Vec<String> = entries.iter().cloned().collect();
        while let Some(entry) = work.pop() {
            let here = receivers.get(&entry).copied().unwrap_or(Receivers::NONE);
            if here == Receivers::NONE {
                continue;
            }
            for target in edges.get(&entry).map(Vec::as_slice).unwrap_or(&[]) {
                let Some(current) = receivers.get_mut(target) else {
                    continue;
                };
                let merged = current.union(here);
                if merged != *current {
                    *current = merged;
                    work.push(target.clone());
                }
            }
        }
        DirectionMap { receivers }
    }

    fn get(&self, at: &str) -> Option<Receivers> {
        self.receivers.get(at).copied()
    }
}

fn local_ref_target(reference: &str) -> Option<String> {
    let fragment = reference.split_once('#').map(|(_, f)| f)?;
    let decoded = pointer::percent_decode(fragment)?;
    (decoded.is_empty() || decoded.starts_with('/')).then_some(decoded)
}

/// The definition name a local `$ref` points at, if it points at a definition.
fn ref_definition(reference: &str) -> Option<String> {
    let target = local_ref_target(reference)?;
    let tokens = pointer::tokens(&target)?;
    match tokens.as_slice() {
        [kw, name] if kw == "$defs" || kw == "definitions" => Some(name.clone()),
        _ => None,
    }
}

struct Comparer<'a> {
    old_root: &'a Value,
    new_root: &'a Value,
    old_dirs: &'a DirectionMap,
    new_dirs: &'a DirectionMap,
    default: Direction,
    version: Option<String>,
    max_depth: usize,
    seen: HashSet<(String, String, u8)>,
    out: &'a mut Vec<Change>,
}

const LOWER_BOUNDS: &[&str] = &["minLength", "minItems", "minProperties", "minContains"];
const UPPER_BOUNDS: &[&str] = &["maxLength", "maxItems", "maxProperties", "maxContains"];
/// Assertion keywords without a finer rule: any difference is `constraint-changed`.
const OTHER_ASSERTIONS: &[&str] = &[
    "not",
    "if",
    "then",
    "else",
    "contains",
    "propertyNames",
    "dependentRequired",
    "dependentSchemas",
    "dependencies",
    "$dynamicRef",
    "$recursiveRef",
];

impl Comparer<'_> {
    fn direction_at(&self, old_at: &str, new_at: &str, inherited: Receivers) -> Receivers {
        let mut r = inherited;
        if let Some(x) = self.old_dirs.get(old_at) {
            r = r.union(x);
        }
        if let Some(x) = self.new_dirs.get(new_at) {
            r = r.union(x);
        }
        r
    }

    fn push(
        &mut self,
        rule: Rule,
        pointer: String,
        old: Option<Value>,
        new: Option<Value>,
        receivers: Receivers,
        open: bool,
    ) {
        let direction = receivers.direction(self.default);
        let class = classify(rule.effect(), direction, open);
        self.out.push(Change {
            rule,
            pointer,
            old,
            new,
            class,
            direction,
            version: self.version.clone(),
        });
    }

    fn node(
        &mut self,
        old: &Value,
        new: &Value,
        old_at: &str,
        new_at: &str,
        inherited: Receivers,
        depth: usize,
    ) {
        if old == new {
            return;
        }
        if depth > self.max_depth {
            self.push(
                Rule::ComparisonTooDeep,
                new_at.to_owned(),
                None,
                None,
                inherited,
                false,
            );
            return;
        }
        let dir = if has_direction(old) || has_direction(new) {
            self.direction_at(old_at, new_at, inherited)
        } else {
            inherited
        };
        let rule = match (old, new) {
            (Value::Object(o), Value::Object(n)) => Ok((o, n)),
            (_, Value::Bool(false)) => Err(Rule::SchemaRemoved),
            (Value::Bool(false), _) => Err(Rule::SchemaRestored),
            (Value::Bool(true), Value::Object(n)) if is_trivial(n) => return,
            (Value::Bool(true), Value::Object(_)) => Err(Rule::SchemaConstrained),
            (Value::Object(o), Value::Bool(true)) if is_trivial(o) => return,
            (Value::Object(_), Value::Bool(true)) => Err(Rule::SchemaUnconstrained),
            _ => Err(Rule::ConstraintChanged),
        };
        let (o, n) = match rule {
            Ok(pair) => pair,
            Err(rule) => {
                return self.push(
                    rule,
                    new_at.to_owned(),
                    Some(old.clone()),
                    Some(new.clone()),
                    dir,
                    false,
                );
            }
        };
        if self.references(o, n, old_at, new_at, dir, depth) {
            return;
        }
        self.types(o, n, new_at, dir);
        self.values(o, n, new_at, dir);
        self.objects(o, n, old_at, new_at, dir, depth);
        self.bounds(o, n, old_at, new_at, dir);
        self.strings(o, n, old_at, new_at, dir);
        self.arrays(o, n, old_at, new_at, dir, depth);
        self.unions(o, n, old_at, new_at, dir, depth);
        for key in OTHER_ASSERTIONS {
            if o.get(*key) != n.get(*key) {
                let at = pointer::push(if n.contains_key(*key) { new_at } else { old_at }, key);
                self.push(
                    Rule::ConstraintChanged,
                    at,
                    o.get(*key).cloned(),
                    n.get(*key).cloned(),
                    dir,
                    false,
                );
            }
        }
    }

    /// Handles `$ref`. Returns true when the nodes were compared through their targets and
    /// nothing else is left to compare.
    fn references(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) -> bool {
        let old_ref = o.get("$ref").and_then(Value::as_str);
        let new_ref = n.get("$ref").and_then(Value::as_str);
        match (old_ref, new_ref) {
            (None, None) => false,
            (Some(a), Some(b)) => {
                let (da, db) = (ref_definition(a), ref_definition(b));
                let same = match (&da, &db) {
                    (Some(x), Some(y)) => x == y,
                    _ => a == b,
                };
                if !same {
                    self.push(
                        Rule::RefRetargeted,
                        pointer::push(new_at, "$ref"),
                        Some(json!(a)),
                        Some(json!(b)),
                        dir,
                        false,
                    );
                    self.follow(a, b, dir, depth);
                }
                false
            }
            (Some(a), None) => {
                if let Some(target) = local_ref_target(a)
                    && let Some(resolved) = pointer::resolve(self.old_root, &target)
                    && self.seen.insert((target.clone(), new_at.to_owned(), dir.0))
                {
                    self.node(
                        resolved,
                        &Value::Object(n.clone()),
                        &target,
                        new_at,
                        dir,
                        depth + 1,
                    );
                }
                true
            }
            (None, Some(b)) => {
                if let Some(target) = local_ref_target(b)
                    && let Some(resolved) = pointer::resolve(self.new_root, &target)
                    && self.seen.insert((old_at.to_owned(), target.clone(), dir.0))
                {
                    self.node(
                        &Value::Object(o.clone()),
                        resolved,
                        old_at,
                        &target,
                        dir,
                        depth + 1,
                    );
                }
                true
            }
        }
    }

    fn follow(&mut self, a: &str, b: &str, dir: Receivers, depth: usize) {
        let (Some(ta), Some(tb)) = (local_ref_target(a), local_ref_target(b)) else {
            return;
        };
        let (Some(va), Some(vb)) = (
            pointer::resolve(self.old_root, &ta),
            pointer::resolve(self.new_root, &tb),
        ) else {
            return;
        };
        if self.seen.insert((ta.clone(), tb.clone(), dir.0)) {
            let dir = self.direction_at(&ta, &tb, dir);
            self.node(va, vb, &ta, &tb, dir, depth + 1);
        }
    }

    fn types(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, at: &str, dir: Receivers) {
        let (old_t, new_t) = (type_set(o.get("type")), type_set(n.get("type")));
        if old_t == new_t {
            return;
        }
        let rule = if new_t & !old_t == 0 {
            Rule::TypeNarrowed
        } else if old_t & !new_t == 0 {
            Rule::TypeWidened
        } else {
            Rule::TypeChanged
        };
        self.push(
            rule,
            pointer::push(at, "type"),
            o.get("type").cloned(),
            n.get("type").cloned(),
            dir,
            false,
        );
    }

    fn values(&mut self, o: &Map<String, Value>, n: &Map<String, Value>, at: &str, dir: Receivers) {
        let old_v = allowed_values(o);
        let new_v = allowed_values(n);
        let key = if n.contains_key("const") || (!n.contains_key("enum") && o.contains_key("const"))
        {
            "const"
        } else {
            "enum"
        };
        let here = pointer::push(at, key);
        match (old_v, new_v) {
            (None, None) => {}
            (None, Some(_)) => {
                let rule = if key == "const" {
                    Rule::ConstAdded
                } else {
                    Rule::EnumAdded
                };
                self.push(rule, here, None, n.get(key).cloned(), dir, false);
            }
            (Some(_), None) => {
                let rule = if o.contains_key("const") {
                    Rule::ConstRemoved
                } else {
                    Rule::EnumRemoved
                };
                let old_key = if o.contains_key("const") {
                    "const"
                } else {
                    "enum"
                };
                self.push(
                    rule,
                    pointer::push(at, old_key),
                    o.get(old_key).cloned(),
                    None,
                    dir,
                    false,
                );
            }
            (Some(ov), Some(nv)) => {
                if o.contains_key("const")
                    && n.contains_key("const")
                    && !o.contains_key("enum")
                    && !n.contains_key("enum")
                {
                    if ov != nv {
                        self.push(
                            Rule::ConstChanged,
                            here,
                            o.get("const").cloned(),
                            n.get("const").cloned(),
                            dir,
                            false,
                        );
                    }
                    return;
                }
                let open = is_open(o);
                let (old_set, new_set) = (ValueSet::new(&ov), ValueSet::new(&nv));
                for v in &ov {
                    if !new_set.contains(v) {
                        self.push(
                            Rule::EnumValueRemoved,
                            here.clone(),
                            Some((*v).clone()),
                            None,
                            dir,
                            false,
                        );
                    }
                }
                for v in &nv {
                    if !old_set.contains(v) {
                        self.push(
                            Rule::EnumValueAdded,
                            here.clone(),
                            None,
                            Some((*v).clone()),
                            dir,
                            open,
                        );
                    }
                }
            }
        }
    }

    fn objects(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let empty = Map::new();
        let old_props = o
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_props = n
            .get("properties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let old_req = string_set(o.get("required"));
        let new_req = string_set(n.get("required"));
        let open = is_open(o) || !is_closed_object(o);
        for (name, old_schema) in old_props {
            let old_p = pointer::push(&pointer::push(old_at, "properties"), name);
            match new_props.get(name) {
                None => self.push(
                    Rule::PropertyRemoved,
                    old_p,
                    Some(old_schema.clone()),
                    None,
                    dir,
                    false,
                ),
                Some(new_schema) => {
                    let new_p = pointer::push(&pointer::push(new_at, "properties"), name);
                    self.node(old_schema, new_schema, &old_p, &new_p, dir, depth + 1);
                }
            }
        }
        for (name, new_schema) in new_props {
            if old_props.contains_key(name) {
                continue;
            }
            let new_p = pointer::push(&pointer::push(new_at, "properties"), name);
            let rule = if new_req.contains(name) {
                Rule::RequiredPropertyAdded
            } else {
                Rule::PropertyAdded
            };
            self.push(rule, new_p, None, Some(new_schema.clone()), dir, open);
        }
        for &name in &new_req.order {
            if !old_req.contains(name)
                && (old_props.contains_key(name) || !new_props.contains_key(name))
            {
                self.push(
                    Rule::RequiredAdded,
                    pointer::push(new_at, "required"),
                    None,
                    Some(json!(name)),
                    dir,
                    false,
                );
            }
        }
        for &name in &old_req.order {
            if !new_req.contains(name)
                && (new_props.contains_key(name) || !old_props.contains_key(name))
            {
                self.push(
                    Rule::RequiredRemoved,
                    pointer::push(new_at, "required"),
                    Some(json!(name)),
                    None,
                    dir,
                    false,
                );
            }
        }
        for key in ["additionalProperties", "unevaluatedProperties"] {
            let (ov, nv) = (o.get(key), n.get(key));
            if ov == nv {
                continue;
            }
            let here = pointer::push(new_at, key);
            let was_false = ov == Some(&Value::Bool(false));
            let is_false = nv == Some(&Value::Bool(false));
            if is_false {
                self.push(
                    Rule::AdditionalPropertiesClosed,
                    here,
                    ov.cloned(),
                    nv.cloned(),
                    dir,
                    false,
                );
            } else if was_false {
                self.push(
                    Rule::AdditionalPropertiesOpened,
                    here,
                    ov.cloned(),
                    nv.cloned(),
                    dir,
                    is_open(o),
                );
            } else {
                let t = Value::Bool(true);
                self.node(
                    ov.unwrap_or(&t),
                    nv.unwrap_or(&t),
                    &pointer::push(old_at, key),
                    &here,
                    dir,
                    depth + 1,
                );
            }
        }
        let old_pp = o
            .get("patternProperties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        let new_pp = n
            .get("patternProperties")
            .and_then(Value::as_object)
            .unwrap_or(&empty);
        for (pattern, old_schema) in old_pp {
            let old_p = pointer::push(&pointer::push(old_at, "patternProperties"), pattern);
            match new_pp.get(pattern) {
                None => self.push(
                    Rule::PatternPropertiesChanged,
                    old_p,
                    Some(old_schema.clone()),
                    None,
                    dir,
                    false,
                ),
                Some(new_schema) => {
                    let new_p = pointer::push(&pointer::push(new_at, "patternProperties"), pattern);
                    self.node(old_schema, new_schema, &old_p, &new_p, dir, depth + 1);
                }
            }
        }
        for (pattern, new_schema) in new_pp {
            if !old_pp.contains_key(pattern) {
                let new_p = pointer::push(&pointer::push(new_at, "patternProperties"), pattern);
                self.push(
                    Rule::PatternPropertiesChanged,
                    new_p,
                    None,
                    Some(new_schema.clone()),
                    dir,
                    false,
                );
            }
        }
    }

    fn bounds(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
    ) {
        // Numeric bounds combine the inclusive and the exclusive keyword into one effective bound.
        for (lower, inclusive, exclusive) in [
            (true, "minimum", "exclusiveMinimum"),
            (false, "maximum", "exclusiveMaximum"),
        ] {
            let ob = numeric_bound(o, inclusive, exclusive, lower);
            let nb = numeric_bound(n, inclusive, exclusive, lower);
            if ob == nb {
                continue;
            }
            let tighter = match (&ob, &nb) {
                (None, Some(_)) => true,
                (Some(_), None) => false,
                (Some(a), Some(b)) => bound_is_tighter(b, a, lower),
                (None, None) => continue,
            };
            let key = nb.as_ref().or(ob.as_ref()).map_or(inclusive, |b| {
                if b.exclusive { exclusive } else { inclusive }
            });
            let at = pointer::push(if nb.is_some() { new_at } else { old_at }, key);
            let old_val = bound_keywords(o, inclusive, exclusive);
            let new_val = bound_keywords(n, inclusive, exclusive);
            let rule = match (lower, tighter) {
                (true, true) => Rule::LowerBoundTightened,
                (true, false) => Rule::LowerBoundLoosened,
                (false, true) => Rule::UpperBoundTightened,
                (false, false) => Rule::UpperBoundLoosened,
            };
            self.push(rule, at, old_val, new_val, dir, false);
        }
        for (lower, keys) in [(true, LOWER_BOUNDS), (false, UPPER_BOUNDS)] {
            for key in keys {
                let (ov, nv) = (
                    o.get(*key).and_then(Value::as_f64),
                    n.get(*key).and_then(Value::as_f64),
                );
                if ov == nv {
                    continue;
                }
                let tighter = match (ov, nv) {
                    (None, Some(_)) => true,
                    (Some(_), None) => false,
                    (Some(a), Some(b)) => {
                        if lower {
                            b > a
                        } else {
                            b < a
                        }
                    }
                    (None, None) => continue,
                };
                let at = pointer::push(if nv.is_some() { new_at } else { old_at }, key);
                let rule = match (lower, tighter) {
                    (true, true) => Rule::LowerBoundTightened,
                    (true, false) => Rule::LowerBoundLoosened,
                    (false, true) => Rule::UpperBoundTightened,
                    (false, false) => Rule::UpperBoundLoosened,
                };
                self.push(
                    rule,
                    at,
                    o.get(*key).cloned(),
                    n.get(*key).cloned(),
                    dir,
                    false,
                );
            }
        }
        let (om, nm) = (
            o.get("multipleOf").and_then(Value::as_f64),
            n.get("multipleOf").and_then(Value::as_f64),
        );
        if om != nm {
            let rule = match (om, nm) {
                (None, Some(_)) => Rule::MultipleOfTightened,
                (Some(_), None) => Rule::MultipleOfLoosened,
                (Some(a), Some(b)) if is_multiple(b, a) => Rule::MultipleOfTightened,
                (Some(a), Some(b)) if is_multiple(a, b) => Rule::MultipleOfLoosened,
                _ => Rule::MultipleOfChanged,
            };
            let at = pointer::push(if nm.is_some() { new_at } else { old_at }, "multipleOf");
            self.push(
                rule,
                at,
                o.get("multipleOf").cloned(),
                n.get("multipleOf").cloned(),
                dir,
                false,
            );
        }
    }

    fn strings(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
    ) {
        for (key, added, removed, changed) in [
            (
                "pattern",
                Rule::PatternAdded,
                Rule::PatternRemoved,
                Rule::PatternChanged,
            ),
            (
                "format",
                Rule::FormatAdded,
                Rule::FormatRemoved,
                Rule::FormatChanged,
            ),
        ] {
            let (ov, nv) = (o.get(key), n.get(key));
            let rule = match (ov, nv) {
                (a, b) if a == b => continue,
                (None, Some(_)) => added,
                (Some(_), None) => removed,
                _ => changed,
            };
            let at = pointer::push(if nv.is_some() { new_at } else { old_at }, key);
            self.push(rule, at, ov.cloned(), nv.cloned(), dir, false);
        }
    }

    fn arrays(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let unique = |m: &Map<String, Value>| m.get("uniqueItems") == Some(&Value::Bool(true));
        match (unique(o), unique(n)) {
            (false, true) => self.push(
                Rule::UniqueItemsAdded,
                pointer::push(new_at, "uniqueItems"),
                o.get("uniqueItems").cloned(),
                n.get("uniqueItems").cloned(),
                dir,
                false,
            ),
            (true, false) => self.push(
                Rule::UniqueItemsRemoved,
                pointer::push(new_at, "uniqueItems"),
                o.get("uniqueItems").cloned(),
                n.get("uniqueItems").cloned(),
                dir,
                false,
            ),
            _ => {}
        }
        let t = Value::Bool(true);
        for key in [
            "items",
            "additionalItems",
            "unevaluatedItems",
            "prefixItems",
        ] {
            let (ov, nv) = (o.get(key), n.get(key));
            if ov == nv {
                continue;
            }
            let (old_k, new_k) = (pointer::push(old_at, key), pointer::push(new_at, key));
            match (ov.unwrap_or(&t), nv.unwrap_or(&t)) {
                (Value::Array(a), Value::Array(b)) => {
                    if a.len() != b.len() {
                        self.push(
                            Rule::ConstraintChanged,
                            new_k.clone(),
                            ov.cloned(),
                            nv.cloned(),
                            dir,
                            false,
                        );
                    }
                    for (i, (x, y)) in a.iter().zip(b).enumerate() {
                        self.node(
                            x,
                            y,
                            &format!("{old_k}/{i}"),
                            &format!("{new_k}/{i}"),
                            dir,
                            depth + 1,
                        );
                    }
                }
                (Value::Array(_), _) | (_, Value::Array(_)) => {
                    self.push(
                        Rule::ConstraintChanged,
                        new_k,
                        ov.cloned(),
                        nv.cloned(),
                        dir,
                        false,
                    );
                }
                (a, b) => self.node(a, b, &old_k, &new_k, dir, depth + 1),
            }
        }
    }

    fn unions(
        &mut self,
        o: &Map<String, Value>,
        n: &Map<String, Value>,
        old_at: &str,
        new_at: &str,
        dir: Receivers,
        depth: usize,
    ) {
        let empty: Vec<Value> = Vec::new();
        for key in ["oneOf", "anyOf", "allOf"] {
            let ov = o.get(key).and_then(Value::as_array).unwrap_or(&empty);
            let nv = n.get(key).and_then(Value::as_array).unwrap_or(&empty);
            if ov == nv {
                continue;
            }
            let (old_k, new_k) = (pointer::push(old_at, key), pointer::push(new_at, key));
            let pairs = match_branches(ov, nv, self.old_root, self.new_root);
            let open = is_open(o);
            let (added, removed) = if key == "allOf" {
                (Rule::AllOfBranchAdded, Rule::AllOfBranchRemoved)
            } else {
                (Rule::VariantAdded, Rule::VariantRemoved)
            };
            let mut matched_new = vec![false; nv.len()];
            for (i, old_branch) in ov.iter().enumerate() {
                match pairs.get(&i) {
                    Some(&j) => {
                        matched_new[j] = true;
                        self.node(
                            old_branch,
                            &nv[j],
                            &format!("{old_k}/{i}"),
                            &format!("{new_k}/{j}"),
                            dir,
                            depth + 1,
                        );
                    }
                    None => self.push(
                        removed,
                        format!("{old_k}/{i}"),
                        Some(old_branch.clone()),
                        None,
                        dir,
                        false,
                    ),
                }
            }
            for (j, new_branch) in nv.iter().enumerate() {
                if !matched_new[j] {
                    self.push(
                        added,
                        format!("{new_k}/{j}"),
                        None,
                        Some(new_branch.clone()),
                        dir,
                        open,
                    );
                }
            }
        }
    }
}

/// Whether a change with `effect`, in a node received as `direction`, breaks.
///
/// The checker assumes the runtime upgrades first: the new schema is what the runtime speaks, the
/// old one what a lagging host speaks. What the runtime receives breaks when it tightens (an old
/// host's message is rejected); what the host receives breaks when it loosens (the new runtime
/// sends something an old host rejects), unless the change only adds a member to something the
/// old host keeps open.
pub fn classify(effect: Effect, direction: Direction, open: bool) -> ChangeClass {
    let runtime_breaks = matches!(
        effect,
        Effect::Tightens | Effect::TightensAndAdds | Effect::Incompatible
    );
    let host_breaks = match effect {
        Effect::Loosens | Effect::Incompatible => true,
        Effect::Adds | Effect::TightensAndAdds => !open,
        Effect::Tightens | Effect::Neutral => false,
    };
    let breaks = match direction {
        Direction::HostToRuntime | Direction::Unspecified => runtime_breaks,
        Direction::RuntimeToHost => host_breaks,
        Direction::Both => runtime_breaks || host_breaks,
    };
    if breaks {
        ChangeClass::Breaking
    } else {
        ChangeClass::Additive
    }
}

fn has_direction(v: &Value) -> bool {
    v.get(DIRECTION).is_some()
}

fn is_open(m: &Map<String, Value>) -> bool {
    m.get(OPEN) == Some(&Value::Bool(true))
}

fn is_closed_object(m: &Map<String, Value>) -> bool {
    m.get("additionalProperties") == Some(&Value::Bool(false))
        || m.get("unevaluatedProperties") == Some(&Value::Bool(false))
}

/// A schema object with nothing but annotations accepts everything, like `true`.
fn is_trivial(m: &Map<String, Value>) -> bool {
    m.keys().all(|k| {
        k.starts_with(ANNOTATION_PREFIX)
            || k.starts_with("x-")
            || matches!(
                k.as_str(),
                "title"
                    | "description"
                    | "default"
                    | "examples"
                    | "$comment"
                    | "deprecated"
                    | "readOnly"
                    | "writeOnly"
                    | "$id"
                    | "$anchor"
                    | "$schema"
            )
    })
}

const T_NULL: u8 = 1;
const T_BOOL: u8 = 2;
const T_OBJECT: u8 = 4;
const T_ARRAY: u8 = 8;
const T_STRING: u8 = 16;
const T_INTEGER: u8 = 32;
const T_FRACTION: u8 = 64;
const T_ALL: u8 = 127;

fn type_bits(name: &str) -> u8 {
    match name {
        "null" => T_NULL,
        "boolean" => T_BOOL,
        "object" => T_OBJECT,
        "array" => T_ARRAY,
        "string" => T_STRING,
        "integer" => T_INTEGER,
        "number" => T_INTEGER | T_FRACTION,
        _ => 0,
    }
}

fn type_set(t: Option<&Value>) -> u8 {
    match t {
        None => T_ALL,
        Some(Value::String(s)) => type_bits(s),
        Some(Value::Array(items)) => items
            .iter()
            .filter_map(Value::as_str)
            .fold(0, |acc, s| acc | type_bits(s)),
        Some(_) => 0,
    }
}

fn allowed_values(m: &Map<String, Value>) -> Option<Vec<&Value>> {
    if let Some(c) = m.get("const") {
        return Some(vec![c]);
    }
    match m.get("enum") {
        Some(Value::Array(items)) => Some(items.iter().collect()),
        _ => None,
    }
}

/// `enum` values looked up in constant time (arrays and objects, rare in an `enum`, by
/// comparison), so that comparing two enums of 300,000 values is linear.
struct ValueSet<'a> {
    scalars: std::collections::HashSet<Scalar<'a>>,
    others: Vec<&'a Value>,
}

/// A value that is neither an array nor an object, keyed as `serde_json` compares it (`1` and
/// `1.0` differ).
#[derive(PartialEq, Eq, Hash)]
enum Scalar<'a> {
    Null,
    Bool(bool),
    Number(String),
    String(&'a str),
}

impl<'a> ValueSet<'a> {
    fn new(values: &[&'a Value]) -> Self {
        let mut set = ValueSet {
            scalars: std::collections::HashSet::with_capacity(values.len()),
            others: Vec::new(),
        };
        for v in values {
            match scalar(v) {
                Some(key) => {
                    set.scalars.insert(key);
                }
                None => set.others.push(v),
            }
        }
        set
    }

    fn contains(&self, v: &Value) -> bool {
        match scalar(v) {
            Some(key) => self.scalars.contains(&key),
            None => self.others.contains(&v),
        }
    }
}

fn scalar(v: &Value) -> Option<Scalar<'_>> {
    Some(match v {
        Value::Null => Scalar::Null,
        Value::Bool(b) => Scalar::Bool(*b),
        Value::Number(n) => Scalar::Number(n.to_string()),
        Value::String(s) => Scalar::String(s),
        Value::Array(_) | Value::Object(_) => return None,
    })
}

/// The strings of a `required` list, in order, with a set of them for lookups: two lists of
/// 200,000 names are compared in linear time, not by a search of one per name of the other.
struct StringSet<'a> {
    order: Vec<&'a str>,
    set: std::collections::HashSet<&'a str>,
}

impl<'a> StringSet<'a> {
    fn contains(&self, name: &str) -> bool {
        self.set.contains(name)
    }
}

fn string_set(v: Option<&Value>) -> StringSet<'_> {
    let order: Vec<&str> = match v {
        Some(Value::Array(items)) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    };
    let set = order.iter().copied().collect();
    StringSet { order, set }
}

#[derive(Debug, Clone, PartialEq)]
struct Bound {
    value: f64,
    exclusive: bool,
}

fn numeric_bound(
    m: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
    lower: bool,
) -> Option<Bound> {
    let a = m.get(inclusive).and_then(Value::as_f64).map(|value| Bound {
        value,
        exclusive: false,
    });
    let b = m.get(exclusive).and_then(Value::as_f64).map(|value| Bound {
        value,
        exclusive: true,
    });
    match (a, b) {
        (Some(a), Some(b)) => Some(if bound_is_tighter(&b, &a, lower) {
            b
        } else {
            a
        }),
        (a, b) => a.or(b),
    }
}

/// Whether bound `x` admits fewer numbers than bound `y`.
fn bound_is_tighter(x: &Bound, y: &Bound, lower: bool) -> bool {
    if x.value == y.value {
        x.exclusive && !y.exclusive
    } else if lower {
        x.value > y.value
    } else {
        x.value < y.value
    }
}

fn bound_keywords(m: &Map<String, Value>, inclusive: &str, exclusive: &str) -> Option<Value> {
    let mut out = Map::new();
    for key in [inclusive, exclusive] {
        if let Some(v) = m.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

fn is_multiple(x: f64, of: f64) -> bool {
    if of == 0.0 {
        return false;
    }
    let q = x / of;
    q.is_finite() && (q - q.round()).abs() < 1e-9
}

/// Pairs old branches with new ones (old index → new index): by discriminating tag when every
/// branch has one, else by referenced definition, then by equality, then by position.
fn match_branches(
    old: &[Value],
    new: &[Value],
    old_root: &Value,
    new_root: &Value,
) -> HashMap<usize, usize> {
    let mut pairs: HashMap<usize, usize> = HashMap::new();
    let mut used = vec![false; new.len()];
    if let Some(tag) = common_tag(old, new, old_root, new_root) {
        let old_tags: Vec<Vec<Value>> = old
            .iter()
            .map(|b| branch_tag(b, &tag, old_root).unwrap_or_default())
            .collect();
        let new_tags: Vec<Vec<Value>> = new
            .iter()
            .map(|b| branch_tag(b, &tag, new_root).unwrap_or_default())
            .collect();
        for (i, ot) in old_tags.iter().enumerate() {
            if let Some(j) =
                (0..new.len()).find(|&j| !used[j] && new_tags[j].iter().any(|v| ot.contains(v)))
            {
                used[j] = true;
                pairs.insert(i, j);
            }
        }
        return pairs;
    }
    // Same referenced definition.
    for (i, b) in old.iter().enumerate() {
        let Some(name) = b
            .get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_definition)
        else {
            continue;
        };
        if let Some(j) = (0..new.len()).find(|&j| {
            !used[j]
                && new[j]
                    .get("$ref")
                    .and_then(Value::as_str)
                    .and_then(ref_definition)
                    .as_deref()
                    == Some(name.as_str())
        }) {
            used[j] = true;
            pairs.insert(i, j);
        }
    }
    // Identical branches.
    for (i, b) in old.iter().enumerate() {
        if pairs.contains_key(&i) {
            continue;
        }
        if let Some(j) = (0..new.len()).find(|&j| !used[j] && new[j] == *b) {
            used[j] = true;
            pairs.insert(i, j);
        }
    }
    // The rest by position among the unmatched, skipping branches that reference a definition
    // (those are matched by name or not at all).
    let is_ref = |b: &Value| {
        b.get("$ref")
            .and_then(Value::as_str)
            .and_then(ref_definition)
            .is_some()
    };
    let mut free_new = (0..new.len()).filter(|&j| !used[j] && !is_ref(&new[j]));
    for (i, b) in old.iter().enumerate() {
        if pairs.contains_key(&i) || is_ref(b) {
            continue;
        }
        match free_new.next() {
            Some(j) => {
                pairs.insert(i, j);
            }
            None => break,
        }
    }
    pairs
}

/// A property that every branch on both sides fixes with `const` or a string `enum`.
fn common_tag(old: &[Value], new: &[Value], old_root: &Value, new_root: &Value) -> Option<String> {
    let first = old.first().or(new.first())?;
    let root = if old.is_empty() { new_root } else { old_root };
    let candidates: Vec<String> = resolve_branch(first, root)?
        .get("properties")?
        .as_object()?
        .keys()
        .cloned()
        .collect();
    candidates.into_iter().find(|tag| {
        old.iter().all(|b| branch_tag(b, tag, old_root).is_some())
            && new.iter().all(|b| branch_tag(b, tag, new_root).is_some())
    })
}

fn resolve_branch<'v>(branch: &'v Value, root: &'v Value) -> Option<&'v Value> {
    match branch.get("$ref").and_then(Value::as_str) {
        Some(r) => pointer::resolve(root, &local_ref_target(r)?),
        None => Some(branch),
    }
}

fn branch_tag(branch: &Value, tag: &str, root: &Value) -> Option<Vec<Value>> {
    let schema = resolve_branch(branch, root)?.get("properties")?.get(tag)?;
    let schema = resolve_branch(schema, root)?;
    if let Some(c) = schema.get("const") {
        return Some(vec![c.clone()]);
    }
    match schema.get("enum") {
        Some(Value::Array(items)) if !items.is_empty() => Some(items.clone()),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classification_table() {
        use ChangeClass::{Additive as A, Breaking as B};
        use Direction::*;
        let cases = [
            (Effect::Tightens, HostToRuntime, false, B),
            (Effect::Tightens, RuntimeToHost, false, A),
            (Effect::Loosens, HostToRuntime, false, A),
            (Effect::Loosens, RuntimeToHost, false, B),
            (Effect::Adds, RuntimeToHost, false, B),
            (Effect::Adds, RuntimeToHost, true, A),
            (Effect::Adds, Both, false, B),
            (Effect::Adds, Both, true, A),
            (Effect::Adds, Unspecified, false, A),
            (Effect::TightensAndAdds, RuntimeToHost, true, A),
            (Effect::TightensAndAdds, HostToRuntime, true, B),
            (Effect::Incompatible, RuntimeToHost, true, B),
            (Effect::Neutral, Both, false, A),
        ];
        for (effect, dir, open, want) in cases {
            assert_eq!(
                classify(effect, dir, open),
                want,
                "{effect:?} {dir:?} open={open}"
            );
        }
    }

    #[test]
    fn rule_ids_are_unique_and_kebab_case() {
        let mut seen = HashSet::new();
        for rule in Rule::ALL {
            assert!(seen.insert(rule.id()), "{}", rule.id());
            assert!(
                rule.id()
                    .bytes()
                    .all(|b| b.is_ascii_lowercase() || b == b'-')
            );
        }
    }
}

/// What freezing a schema over an existing baseline amounts to (see [`freeze_decision`]).
#[derive(Debug, Clone, PartialEq)]
pub enum FreezeDecision {
    /// No baseline yet: write it.
    Create,
    /// The baseline already holds exactly this document.
    Unchanged,
    /// The wire version was bumped and nothing breaks a version still supported: replace it.
    Bumped(CompatReport),
    /// Same wire version, only additive changes, and the caller allowed that: replace it.
    Additive(CompatReport),
    /// Refused: same wire version (pass the additive permission to replace it when nothing breaks).
    SameVersion(CompatReport),
    /// Refused: changes break a version the new document still claims to support.
    Breaking(CompatReport),
    /// Refused: the new wire version is older than the baseline's.
    Downgrade {
        /// The baseline's version.
        baseline: String,
        /// The new document's version.
        new: String,
    },
    /// Refused: a document does not declare its wire version.
    NoVersion,
}

impl FreezeDecision {
    /// Whether the baseline may be (or already is) written.
    pub fn allows_write(&self) -> bool {
        matches!(
            self,
            FreezeDecision::Create
                | FreezeDecision::Unchanged
                | FreezeDecision::Bumped(_)
                | FreezeDecision::Additive(_)
        )
    }

    /// Stable code of the decision.
    pub fn code(&self) -> &'static str {
        match self {
            FreezeDecision::Create => "baseline.created",
            FreezeDecision::Unchanged => "baseline.unchanged",
            FreezeDecision::Bumped(_) => "baseline.bumped",
            FreezeDecision::Additive(_) => "baseline.additive",
            FreezeDecision::SameVersion(_) => "baseline.same-version",
            FreezeDecision::Breaking(_) => "baseline.breaking",
            FreezeDecision::Downgrade { .. } => "baseline.downgrade",
            FreezeDecision::NoVersion => "baseline.no-version",
        }
    }

    /// The comparison with the old baseline, when one was made.
    pub fn report(&self) -> Option<&CompatReport> {
        match self {
            FreezeDecision::Bumped(r)
            | FreezeDecision::Additive(r)
            | FreezeDecision::SameVersion(r)
            | FreezeDecision::Breaking(r) => Some(r),
            _ => None,
        }
    }

    /// A sentence a person understands.
    pub fn describe(&self) -> String {
        match self {
            FreezeDecision::Create => "baseline written".to_owned(),
            FreezeDecision::Unchanged => "baseline already up to date".to_owned(),
            FreezeDecision::Bumped(_) => "wire version bumped; baseline replaced".to_owned(),
            FreezeDecision::Additive(r) => {
                format!(
                    "same wire version, {} additive change(s); baseline replaced",
                    r.changes.len()
                )
            }
            FreezeDecision::SameVersion(r) => format!(
                "refused: the wire version was not bumped ({} change(s), {} breaking); bump it, or allow additive re-freezing",
                r.changes.len(),
                r.breaking().count()
            ),
            FreezeDecision::Breaking(r) => format!(
                "refused: {} breaking change(s) against a version the new schema still supports",
                r.breaking().count()
            ),
            FreezeDecision::Downgrade { baseline, new } => {
                format!("refused: wire version {new} is older than the baseline's {baseline}")
            }
            FreezeDecision::NoVersion => {
                "refused: both documents must declare a wire version (x-agentwire or x-cc-protocol)"
                    .to_owned()
            }
        }
    }
}

/// Decides whether `new` may replace the frozen `baseline`.
///
/// A missing baseline is created. Otherwise the wire versions (identity) decide: a newer version
/// may replace the baseline as long as no breaking change touches a version the new document
/// still supports (a change in version `V`, or in the baseline's version for single-version
/// documents, is tolerated only when `V` is below the new `minimumCompatibleVersion`); the same
/// version is refused, unless `allow_additive` and nothing breaks; an older version is refused.
pub fn freeze_decision(
    baseline: Option<&SchemaDocument>,
    new: &SchemaDocument,
    allow_additive: bool,
) -> Result<FreezeDecision, crate::identity::IdentityError> {
    let Some(baseline) = baseline else {
        return Ok(FreezeDecision::Create);
    };
    if baseline.value() == new.value() {
        return Ok(FreezeDecision::Unchanged);
    }
    let old_id = baseline.identity()?;
    let new_id = new.identity()?;
    let (Some(old_version), Some(new_version)) = (old_id.version.clone(), new_id.version.clone())
    else {
        return Ok(FreezeDecision::NoVersion);
    };
    if new_version < old_version {
        return Ok(FreezeDecision::Downgrade {
            baseline: old_version.as_str().to_owned(),
            new: new_version.as_str().to_owned(),
        });
    }
    let report = compat(baseline, new);
    if new_version == old_version {
        return Ok(if report.is_compatible() && allow_additive {
            FreezeDecision::Additive(report)
        } else if report.is_compatible() {
            FreezeDecision::SameVersion(report)
        } else {
            FreezeDecision::Breaking(report)
        });
    }
    let still_supported = |change: &Change| {
        let affected = change
            .version
            .as_deref()
            .and_then(|v| WireVersion::parse(v).ok())
            .unwrap_or_else(|| old_version.clone());
        new_id
            .minimum_compatible_version
            .as_ref()
            .is_none_or(|min| affected >= *min)
    };
    if report.breaking().any(still_supported) {
        Ok(FreezeDecision::Breaking(report))
    } else {
        Ok(FreezeDecision::Bumped(report))
    }
}
