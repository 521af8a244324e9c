//! The plan's second pass over unions: branch type masks, literal-only unions merged into
//! enums, and dispatch tables for unions told apart by a literal property or a condition.

use super::*;

impl Compiler<'_> {
    /// Second pass, once every node exists: branch type masks, literal-only unions merged into
    /// enums, and tag tables for unions told apart by a literal property.
    pub(super) fn add_tag_tables(&mut self) {
        for id in 0..self.plan.nodes.len() {
            let mut checks = std::mem::take(&mut self.plan.nodes[id].checks);
            for check in &mut checks {
                let (Check::AnyOf(u) | Check::OneOf(u)) = check else {
                    continue;
                };
                u.masks = u
                    .branches
                    .iter()
                    .map(|b| self.effective_types(*b))
                    .collect();
                u.tag = self.tag_table(&u.branches);
            }
            for check in &mut checks {
                if let Check::AllOf(members) = check
                    && let Some(t) = self.cond_table(members)
                {
                    *check = Check::AllOfTagged(Box::new(t));
                }
            }
            // anyOf of plain literals (how TypeBox writes a union of string literals).
            for check in &mut checks {
                if let Check::AnyOf(u) = check
                    && let Some(set) = self.literal_union(&u.branches)
                {
                    *check = Check::Enum(Box::new(set));
                }
            }
            self.plan.nodes[id].checks = checks;
        }
    }

    /// The node after following bare `$ref` chains.
    fn target(&self, id: NodeId) -> NodeId {
        self.plan.alias[id as usize]
    }

    fn effective_types(&self, id: NodeId) -> u8 {
        let n = &self.plan.nodes[self.target(id) as usize];
        let mut mask = n.types;
        if mask & T_NUM != 0 {
            mask |= T_INT;
        }
        mask
    }

    /// String literals a node accepts when it accepts nothing else.
    fn literals(&self, id: NodeId) -> Option<Vec<Box<str>>> {
        let n = &self.plan.nodes[self.target(id) as usize];
        if n.types & T_STR == 0 {
            return None;
        }
        match n.checks.as_slice() {
            [Check::ConstStr(s)] => Some(vec![s.clone()]),
            [Check::Enum(e)] if e.others.is_empty() => Some(e.strings.clone()),
            _ => None,
        }
    }

    fn literal_union(&self, branches: &[NodeId]) -> Option<EnumSet> {
        let mut all = Vec::new();
        for b in branches {
            all.extend(self.literals(*b)?);
        }
        Some(enum_set(all.into_iter().map(|s| Value::String(s.into()))))
    }

    /// The `if` and `then` of a member that is an `if`/`then` alone (no `else`, no type),
    /// through `$ref`s.
    fn conditional(&self, member: NodeId) -> Option<(NodeId, NodeId)> {
        let id = self.target(member);
        let n = &self.plan.nodes[id as usize];
        match n.checks.as_slice() {
            [
                Check::If {
                    cond,
                    then: Some(then),
                    otherwise: None,
                },
            ] if n.types == T_ANY => Some((*cond, *then)),
            _ => None,
        }
    }

    /// The tag property and values a conditional member's `if` demands, when its `if`
    /// requires one literal string property and it has no `else`.
    fn guarded(&self, member: NodeId) -> Option<Guarded> {
        let (cond, _) = self.conditional(member)?;
        let c = &self.plan.nodes[self.target(cond) as usize];
        let o = c.checks.iter().find_map(|c| {
            if let Check::Obj(o) = c {
                Some(&**o)
            } else {
                None
            }
        })?;
        let tags = o
            .required
            .iter()
            .filter_map(|r| {
                let values = self.literals(o.props[*r as usize]?)?;
                Some((o.names[*r as usize].clone(), values))
            })
            .collect::<Vec<_>>();
        (!tags.is_empty()).then_some((member, tags))
    }

    /// The `if` of a guarded member as lookups (see [`FastCond`]), when it is that simple. The
    /// tag `property` is left out: the dispatch found its value among the literals the `if`
    /// accepts for it.
    fn fast_cond(&self, member: NodeId, property: &str) -> Option<FastCond> {
        let (cond, then) = self.conditional(member)?;
        let c = &self.plan.nodes[self.target(cond) as usize];
        let [Check::Obj(o)] = c.checks.as_slice() else {
            return None;
        };
        let simple = c.types & T_OBJ != 0
            && o.max_properties.is_none()
            && o.min_properties.is_none()
            && matches!(o.additional, Rest::Any)
            && o.pattern_props.is_empty()
            && o.property_names.is_none()
            && o.dependent_required.is_empty()
            && o.dependent_schemas.is_empty();
        if !simple {
            return None;
        }
        let props = o
            .names
            .iter()
            .enumerate()
            .filter(|(_, name)| &***name != property)
            .map(|(k, name)| CondProp {
                name: name.clone(),
                schema: o.props[k],
                required: o.required.contains(&(k as u32)),
            })
            .collect();
        Some(FastCond { props, then })
    }

    fn cond_table(&self, members: &[NodeId]) -> Option<CondTable> {
        let guarded: Vec<_> = members.iter().filter_map(|m| self.guarded(*m)).collect();
        if guarded.len() < 2 {
            return None;
        }
        // The tag: a property every guarded member's `if` requires as a literal.
        let property = guarded[0].1.iter().map(|(n, _)| n.clone()).find(|name| {
            guarded
                .iter()
                .all(|(_, tags)| tags.iter().any(|(n, _)| n == name))
        })?;
        let mut table: AHashMap<Box<str>, Vec<Guard>> = AHashMap::new();
        for (member, tags) in &guarded {
            let Some((_, values)) = tags.iter().find(|(n, _)| *n == property) else {
                continue;
            };
            for v in values {
                table.entry(v.clone()).or_default().push(Guard {
                    member: *member,
                    cond: self.fast_cond(*member, &property),
                });
            }
        }
        let dispatched: Vec<NodeId> = guarded.iter().map(|(m, _)| *m).collect();
        Some(CondTable {
            all: members.into(),
            others: members
                .iter()
                .copied()
                .filter(|m| !dispatched.contains(m))
                .collect(),
            property,
            table,
        })
    }

    fn tag_table(&self, branches: &[NodeId]) -> Option<TagTable> {
        if branches.len() < 2 {
            return None;
        }
        let objs: Vec<&ObjPlan> = branches
            .iter()
            .map(|b| {
                let n = &self.plan.nodes[self.target(*b) as usize];
                n.checks.iter().find_map(|c| {
                    if let Check::Obj(o) = c {
                        Some(&**o)
                    } else {
                        None
                    }
                })
            })
            .collect::<Option<_>>()?;
        'candidate: for (i, name) in objs[0].names.iter().enumerate() {
            let Some(first) = objs[0].props[i] else {
                continue;
            };
            let mut table: AHashMap<Box<str>, Vec<u32>> = AHashMap::new();
            for (bi, o) in objs.iter().enumerate() {
                let prop = if bi == 0 {
                    Some(first)
                } else {
                    o.index_of(name).and_then(|j| o.props[j as usize])
                };
                let Some(values) = prop.and_then(|p| self.literals(p)) else {
                    continue 'candidate;
                };
                for v in values {
                    table.entry(v).or_default().push(bi as u32);
                }
            }
            let absent = objs
                .iter()
                .enumerate()
                .filter(|(_, o)| o.index_of(name).is_none_or(|j| !o.required.contains(&j)))
                .map(|(bi, _)| bi as u32)
                .collect();
            return Some(TagTable {
                property: name.clone(),
                table,
                absent,
            });
        }
        None
    }
}

/// A conditional member and the literal properties (name, accepted values) its `if` requires.
type Guarded = (NodeId, Vec<(Box<str>, Vec<Box<str>>)>);
