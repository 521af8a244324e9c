//! Arrays: `uniqueItems`, and the item keywords (`items`, `additionalItems`,
//! `unevaluatedItems`, `prefixItems`), compared position by position.

use serde_json::{Map, Value};

use super::Comparer;
use crate::compat::Rule;
use crate::compat::direction::Receivers;
use crate::pointer;

impl Comparer<'_> {
    pub(super) fn arrays(
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
}
