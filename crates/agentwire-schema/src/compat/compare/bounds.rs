//! Bounds and string constraints: numeric bounds (the inclusive and exclusive keyword combined
//! into one effective [`Bound`]), length and count bounds, `multipleOf`, and `pattern` and
//! `format`.

use serde_json::{Map, Value};

use super::Comparer;
use crate::compat::Rule;
use crate::compat::direction::Receivers;
use crate::pointer;

pub(super) const LOWER_BOUNDS: &[&str] = &["minLength", "minItems", "minProperties", "minContains"];
pub(super) const UPPER_BOUNDS: &[&str] = &["maxLength", "maxItems", "maxProperties", "maxContains"];

impl Comparer<'_> {
    pub(super) fn bounds(
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

    pub(super) fn strings(
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
}

#[derive(Debug, Clone, PartialEq)]
pub(super) struct Bound {
    value: f64,
    exclusive: bool,
}

pub(super) fn numeric_bound(
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
pub(super) fn bound_is_tighter(x: &Bound, y: &Bound, lower: bool) -> bool {
    if x.value == y.value {
        x.exclusive && !y.exclusive
    } else if lower {
        x.value > y.value
    } else {
        x.value < y.value
    }
}

pub(super) fn bound_keywords(
    m: &Map<String, Value>,
    inclusive: &str,
    exclusive: &str,
) -> Option<Value> {
    let mut out = Map::new();
    for key in [inclusive, exclusive] {
        if let Some(v) = m.get(key) {
            out.insert(key.to_owned(), v.clone());
        }
    }
    (!out.is_empty()).then_some(Value::Object(out))
}

pub(super) fn is_multiple(x: f64, of: f64) -> bool {
    if of == 0.0 {
        return false;
    }
    let q = x / of;
    q.is_finite() && (q - q.round()).abs() < 1e-9
}
