//! Definition reachability: definitions reached neither from the root schema nor from a
//! registry (the root `methods` map, vendor `x-*` data) are reported, or the document is read
//! as a registry when most of them are.

use std::collections::HashMap;

use serde_json::{Map, Value};

use super::{Linter, RefTarget};
use crate::lint::{DefinitionRoots, LintCode};
use crate::pointer;
use crate::walk;

/// Unreferenced definitions beyond this share (in percent) make a document a registry.
pub const REGISTRY_UNREFERENCED_PERCENT: usize = 50;

impl Linter<'_> {
    /// Definitions are reachable from the root schema, from `discriminator.mapping`, and from
    /// registries: the root `methods` map and vendor `x-*` data that name a definition (by name
    /// or by reference) or hold `$ref`s.
    pub(super) fn check_definitions(&mut self) {
        let Value::Object(root) = self.root else {
            return;
        };
        let containers: Vec<&str> = ["$defs", "definitions"]
            .into_iter()
            .filter(|k| root.get(*k).is_some_and(Value::is_object))
            .collect();
        let mut defs: Vec<(&str, &str, &Value)> = Vec::new();
        for container in &containers {
            if let Some(Value::Object(entries)) = root.get(*container) {
                defs.extend(
                    entries
                        .iter()
                        .map(|(name, v)| (*container, name.as_str(), v)),
                );
            }
        }
        if defs.is_empty() {
            return;
        }
        let index: HashMap<(&str, &str), usize> = defs
            .iter()
            .enumerate()
            .map(|(i, (c, n, _))| ((*c, *n), i))
            .collect();
        let by_name: HashMap<&str, usize> = defs
            .iter()
            .enumerate()
            .map(|(i, (_, n, _))| (*n, i))
            .rev()
            .collect();
        let mut reached = vec![false; defs.len()];
        let mut queue: Vec<usize> = Vec::new();
        let mark = |targets: Vec<usize>, reached: &mut Vec<bool>, queue: &mut Vec<usize>| {
            for t in targets {
                if !reached[t] {
                    reached[t] = true;
                    queue.push(t);
                }
            }
        };
        // The root schema without its definition containers, plus root registries.
        let mut targets = Vec::new();
        for (key, value) in root {
            if containers.contains(&key.as_str()) {
                continue;
            }
            if key.starts_with("x-") || key == "methods" {
                self.registry_targets(value, &index, &by_name, &mut targets);
            } else {
                let single: Map<String, Value> =
                    std::iter::once((key.clone(), value.clone())).collect();
                self.schema_targets(&Value::Object(single), &index, &by_name, &mut targets);
            }
        }
        mark(targets, &mut reached, &mut queue);
        while let Some(i) = queue.pop() {
            let mut targets = Vec::new();
            self.schema_targets(defs[i].2, &index, &by_name, &mut targets);
            mark(targets, &mut reached, &mut queue);
        }
        let unreached: Vec<usize> = (0..defs.len()).filter(|i| !reached[*i]).collect();
        if unreached.is_empty() {
            return;
        }
        let registry = match self.definitions {
            DefinitionRoots::Registry => return,
            DefinitionRoots::Rooted => false,
            DefinitionRoots::Auto => {
                unreached.len() * 100 > defs.len() * REGISTRY_UNREFERENCED_PERCENT
            }
        };
        if registry {
            let container = containers.first().copied().unwrap_or("$defs");
            self.push(
                LintCode::RegistryDocument,
                pointer::push("", container),
                format!(
                    "{} of {} definitions are referenced neither from the root schema nor from a registry: \
                     the document is read as a registry whose definitions are entry points by name, \
                     so unreferenced definitions are not reported one by one",
                    unreached.len(),
                    defs.len()
                ),
            );
            return;
        }
        for i in unreached {
            let (container, name, _) = defs[i];
            self.push(
                LintCode::UnreachableDefinition,
                pointer::push(&pointer::push("", container), name),
                format!("definition {name:?} is referenced neither from the root schema nor from a registry"),
            );
        }
    }

    /// Definitions a schema subtree references: `$ref`s, discriminator mappings, and the
    /// vendor data inside it.
    fn schema_targets(
        &self,
        schema: &Value,
        index: &HashMap<(&str, &str), usize>,
        by_name: &HashMap<&str, usize>,
        out: &mut Vec<usize>,
    ) {
        walk::for_each_subschema(schema, |_, node| {
            let Value::Object(map) = node else { return };
            if let Some(Value::String(reference)) = map.get("$ref") {
                out.extend(self.definition_of(reference, index));
            }
            if let Some(Value::Object(mapping)) =
                map.get("discriminator").and_then(|d| d.get("mapping"))
            {
                for target in mapping.values().filter_map(Value::as_str) {
                    out.extend(self.definition_of(target, index));
                }
            }
            for (key, value) in map {
                if key.starts_with("x-") {
                    self.registry_targets(value, index, by_name, out);
                }
            }
        });
    }

    /// Definitions named by registry data: a string equal to a definition name, a string that is
    /// a reference to one, or a `$ref` member.
    fn registry_targets(
        &self,
        data: &Value,
        index: &HashMap<(&str, &str), usize>,
        by_name: &HashMap<&str, usize>,
        out: &mut Vec<usize>,
    ) {
        let mut stack = vec![data];
        while let Some(value) = stack.pop() {
            match value {
                Value::String(s) => {
                    if let Some(i) = by_name.get(s.as_str()) {
                        out.push(*i);
                    } else if s.contains('#') {
                        out.extend(self.definition_of(s, index));
                    }
                }
                Value::Array(items) => stack.extend(items),
                Value::Object(map) => stack.extend(map.values()),
                _ => {}
            }
        }
    }

    fn definition_of(
        &self,
        reference: &str,
        index: &HashMap<(&str, &str), usize>,
    ) -> Option<usize> {
        let RefTarget::Pointer(target) = self.resolve(reference) else {
            return None;
        };
        let tokens = pointer::tokens(&target)?;
        let [container, name, ..] = tokens.as_slice() else {
            return None;
        };
        index.get(&(container.as_str(), name.as_str())).copied()
    }
}
