//! The failure path of a plan: the walk a full report makes ([`walk_all`], counted against the
//! step budget before the report is collected, and telling which schemas it reaches) and the
//! instance path of the first error in AJV's order ([`first_error`]).

use super::*;

/// Visits what a full report of `node` on `i` visits: every check and every branch, without
/// stopping at a failure, one step each. Run under [`bounded`] before the report pass, whose
/// engine collects every error of such a walk: a walk over budget is not reported in full.
pub(crate) fn walk_all<'a, I: Instance<'a>, F: FnMut(NodeId)>(
    plan: &Plan,
    node: NodeId,
    i: I,
    depth: u32,
    seen: &mut F,
) {
    seen(node);
    let node = plan.alias[node as usize];
    if !step(depth) {
        return;
    }
    let d = depth + 1;
    for check in &plan.nodes[node as usize].checks {
        if STEPS_LEFT.get() == 0 {
            return;
        }
        match check {
            Check::Ref(s) | Check::Not(s) => walk_all(plan, *s, i, d, seen),
            Check::AnyOf(u) | Check::OneOf(u) => {
                u.branches
                    .iter()
                    .for_each(|b| walk_all(plan, *b, i, d, seen));
            }
            Check::AllOf(all) => all.iter().for_each(|s| walk_all(plan, *s, i, d, seen)),
            Check::AllOfTagged(t) => t.all.iter().for_each(|s| walk_all(plan, *s, i, d, seen)),
            Check::If {
                cond,
                then,
                otherwise,
            } => {
                walk_all(plan, *cond, i, d, seen);
                then.iter()
                    .chain(otherwise)
                    .for_each(|s| walk_all(plan, *s, i, d, seen));
            }
            Check::Arr(a) if i.kind() == Kind::Array => {
                for (k, item) in i.items().enumerate() {
                    match (a.prefix.get(k), &a.rest) {
                        (Some(s), _) | (None, Rest::Schema(s)) => walk_all(plan, *s, item, d, seen),
                        _ => {}
                    }
                    if let Some(c) = a.contains {
                        walk_all(plan, c, item, d, seen);
                    }
                }
            }
            Check::Obj(o) if i.kind() == Kind::Object => {
                for (key, value) in i.entries() {
                    let declared = o.index_of(key).and_then(|k| o.props[k as usize]);
                    if let Some(s) = declared {
                        walk_all(plan, s, value, d, seen);
                    }
                    let mut matched = false;
                    for (p, s) in o.pattern_props.iter() {
                        if plan.patterns[*p as usize].is_match(key) != Some(false) {
                            matched = true;
                            walk_all(plan, *s, value, d, seen);
                        }
                    }
                    if let (None, false, Rest::Schema(s)) = (declared, matched, &o.additional) {
                        walk_all(plan, *s, value, d, seen);
                    }
                    if let Some(pn) = o.property_names {
                        walk_all(plan, pn, KeyInstance(key), d, seen);
                    }
                }
                for (k, s) in o.dependent_schemas.iter() {
                    if i.get(&o.names[*k as usize]).is_some() {
                        walk_all(plan, *s, i, d, seen);
                    }
                }
            }
            _ => {}
        }
    }
}

/// The instance path of the first error AJV (`allErrors: false`) would report for `node` on
/// `i`, or `None` when `i` is valid. Follows AJV's keyword order and reports the errors of
/// failed union branches first, as AJV does; no dispatch shortcuts, since this runs only on the
/// failure path.
pub(crate) fn first_error<'a, I: Instance<'a>>(
    plan: &Plan,
    node: NodeId,
    i: I,
    path: &str,
    depth: u32,
) -> Option<String> {
    if known_valid(plan, node, i, depth) {
        return None;
    }
    let node = plan.alias[node as usize];
    if !step(depth) {
        return Some(path.to_owned());
    }
    let n = &plan.nodes[node as usize];
    if n.types & type_bits(i) == 0 {
        return Some(path.to_owned());
    }
    let here = || Some(path.to_owned());
    for check in &n.checks {
        let err = match check {
            Check::False => here(),
            Check::Ref(t) => first_error(plan, *t, i, path, depth + 1),
            Check::ConstStr(_) | Check::Const(_) | Check::Enum(_) => {
                if literal_ok(check, i) {
                    None
                } else {
                    here()
                }
            }
            Check::Not(s) => {
                if valid(plan, *s, i, depth + 1) {
                    here()
                } else {
                    None
                }
            }
            Check::AnyOf(u) => {
                if any_of(plan, u, i, depth) {
                    None
                } else {
                    first_error(plan, u.branches[0], i, path, depth + 1).or_else(here)
                }
            }
            Check::OneOf(u) => {
                if one_of(plan, u, i, depth) {
                    None
                } else {
                    u.branches
                        .iter()
                        .find_map(|b| first_error(plan, *b, i, path, depth + 1))
                        .or_else(here)
                }
            }
            Check::AllOfTagged(t) => t
                .all
                .iter()
                .find_map(|s| first_error(plan, *s, i, path, depth + 1)),
            Check::AllOf(all) => all
                .iter()
                .find_map(|s| first_error(plan, *s, i, path, depth + 1)),
            Check::If {
                cond,
                then,
                otherwise,
            } => {
                let branch = if valid(plan, *cond, i, depth + 1) {
                    then
                } else {
                    otherwise
                };
                branch.and_then(|s| first_error(plan, s, i, path, depth + 1))
            }
            Check::Num(c) => {
                (i.kind() == Kind::Number && !num_ok(c, i.as_f64())).then(|| path.to_owned())
            }
            Check::Str(c) => {
                (i.kind() == Kind::String && !str_ok(plan, c, i.as_str())).then(|| path.to_owned())
            }
            Check::Arr(a) => {
                if i.kind() == Kind::Array {
                    arr_error(plan, a, i, path, depth)
                } else {
                    None
                }
            }
            Check::Obj(o) => {
                if i.kind() == Kind::Object {
                    obj_error(plan, o, i, path, depth)
                } else {
                    None
                }
            }
        };
        if err.is_some() {
            return err;
        }
    }
    None
}

fn arr_error<'a, I: Instance<'a>>(
    plan: &Plan,
    a: &ArrPlan,
    i: I,
    path: &str,
    depth: u32,
) -> Option<String> {
    let len = i.len();
    if a.max_items.is_some_and(|m| len > m) || a.min_items.is_some_and(|m| len < m) {
        return Some(path.to_owned());
    }
    if a.unique && len > 1 && !unique(i) {
        return Some(path.to_owned());
    }
    let rest_error = |k: usize, item: I| match a.rest {
        Rest::Any => None,
        Rest::Deny => Some(path.to_owned()),
        Rest::Schema(s) => first_error(plan, s, item, &format!("{path}/{k}"), depth + 1),
    };
    if a.rest_first {
        for (k, item) in i.items().enumerate().skip(a.prefix.len()) {
            if let Some(e) = rest_error(k, item) {
                return Some(e);
            }
        }
    }
    for (k, item) in i.items().enumerate() {
        let err = match a.prefix.get(k) {
            Some(s) => first_error(plan, *s, item, &format!("{path}/{k}"), depth + 1),
            None if a.rest_first => None,
            None => rest_error(k, item),
        };
        if err.is_some() {
            return err;
        }
    }
    if let Some(c) = a.contains {
        let n = i.items().filter(|x| valid(plan, c, *x, depth + 1)).count();
        if n < a.min_contains || a.max_contains.is_some_and(|m| n > m) {
            return Some(path.to_owned());
        }
    }
    None
}

fn obj_error<'a, I: Instance<'a>>(
    plan: &Plan,
    o: &ObjPlan,
    i: I,
    path: &str,
    depth: u32,
) -> Option<String> {
    let len = i.len();
    if o.max_properties.is_some_and(|m| len > m) || o.min_properties.is_some_and(|m| len < m) {
        return Some(path.to_owned());
    }
    // AJV order: required, propertyNames, additionalProperties, dependencies, properties,
    // patternProperties.
    for r in o.required.iter() {
        if i.get(&o.names[*r as usize]).is_none() {
            return Some(path.to_owned());
        }
    }
    if let Some(pn) = o.property_names {
        for (key, _) in i.entries() {
            if !valid(plan, pn, KeyInstance(key), depth + 1) {
                return Some(path.to_owned());
            }
        }
    }
    for (key, value) in i.entries() {
        let declared = o
            .index_of(key)
            .is_some_and(|k| o.props[k as usize].is_some());
        let mut matched = false;
        for (p, _) in o.pattern_props.iter() {
            match plan.patterns[*p as usize].is_match(key) {
                Some(true) => matched = true,
                Some(false) => {}
                None => return Some(pointer::push(path, key)),
            }
        }
        if !declared && !matched {
            match o.additional {
                Rest::Any => {}
                Rest::Deny => return Some(path.to_owned()),
                Rest::Schema(s) => {
                    if let Some(e) =
                        first_error(plan, s, value, &pointer::push(path, key), depth + 1)
                    {
                        return Some(e);
                    }
                }
            }
        }
    }
    for (k, deps) in o.dependent_required.iter() {
        if i.get(&o.names[*k as usize]).is_some()
            && !deps.iter().all(|d| i.get(&o.names[*d as usize]).is_some())
        {
            return Some(path.to_owned());
        }
    }
    for (k, s) in o.dependent_schemas.iter() {
        if i.get(&o.names[*k as usize]).is_some()
            && let Some(e) = first_error(plan, *s, i, path, depth + 1)
        {
            return Some(e);
        }
    }
    for (k, name) in o.names.iter().enumerate() {
        let Some(s) = o.props[k] else { continue };
        if let Some(v) = i.get(name)
            && let Some(e) = first_error(plan, s, v, &pointer::push(path, name), depth + 1)
        {
            return Some(e);
        }
    }
    for (p, s) in o.pattern_props.iter() {
        for (key, value) in i.entries() {
            if plan.patterns[*p as usize].is_match(key) == Some(true)
                && let Some(e) = first_error(plan, *s, value, &pointer::push(path, key), depth + 1)
            {
                return Some(e);
            }
        }
    }
    None
}
