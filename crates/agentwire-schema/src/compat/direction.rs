//! Who receives each node of a document: the `x-agentwire-direction` annotation, propagated
//! through nesting and references to every entry node, and the `x-agentwire-open` marker.

use std::collections::{HashMap, HashSet};
use std::fmt;

use serde_json::{Map, Value};

use crate::compat::definitions_of;
use crate::pointer;

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

    pub(super) fn receivers(self) -> Receivers {
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
pub(super) struct Receivers(pub(super) u8);

impl Receivers {
    pub(super) const NONE: Receivers = Receivers(0);
    pub(super) const RUNTIME: Receivers = Receivers(1);
    pub(super) const HOST: Receivers = Receivers(2);

    pub(super) fn union(self, other: Receivers) -> Receivers {
        Receivers(self.0 | other.0)
    }

    pub(super) fn direction(self, default: Direction) -> Direction {
        match self.0 {
            1 => Direction::HostToRuntime,
            2 => Direction::RuntimeToHost,
            3 => Direction::Both,
            _ => default,
        }
    }
}

/// The receivers of every "entry" node of one document: the root, every definition, every
/// `$ref` target and every node annotated with `x-agentwire-direction`. A node's receivers are
/// its own annotation plus everything that reaches it (through nesting or references).
pub(super) struct DirectionMap {
    receivers: HashMap<String, Receivers>,
}

impl DirectionMap {
    pub(super) fn build(root: &Value) -> DirectionMap {
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

    pub(super) fn get(&self, at: &str) -> Option<Receivers> {
        self.receivers.get(at).copied()
    }
}

pub(super) fn local_ref_target(reference: &str) -> Option<String> {
    let fragment = reference.split_once('#').map(|(_, f)| f)?;
    let decoded = pointer::percent_decode(fragment)?;
    (decoded.is_empty() || decoded.starts_with('/')).then_some(decoded)
}

/// The definition name a local `$ref` points at, if it points at a definition.
pub(super) fn ref_definition(reference: &str) -> Option<String> {
    let target = local_ref_target(reference)?;
    let tokens = pointer::tokens(&target)?;
    match tokens.as_slice() {
        [kw, name] if kw == "$defs" || kw == "definitions" => Some(name.clone()),
        _ => None,
    }
}

pub(super) fn has_direction(v: &Value) -> bool {
    v.get(DIRECTION).is_some()
}

pub(super) fn is_open(m: &Map<String, Value>) -> bool {
    m.get(OPEN) == Some(&Value::Bool(true))
}
