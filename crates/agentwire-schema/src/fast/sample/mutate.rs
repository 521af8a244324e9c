//! Mutations: a generated value broken in one place, to exercise the failure paths of the
//! validators.

use serde_json::{Value, json};

use super::Rng;
/// Breaks a value in one place: a member removed, added or retyped, a string or number pushed
/// out of range, an array grown or emptied. Returns the mutated copy.
pub fn mutate(value: &Value, rng: &mut Rng) -> Value {
    let mut v = value.clone();
    // Pick a node by walking down a random path of indexes.
    let mut path = Vec::new();
    let mut cur = &v;
    for _ in 0..rng.below(6) {
        let next = match cur {
            Value::Object(m) if !m.is_empty() => {
                let k = rng.below(m.len());
                m.values().nth(k).map(|x| (k, x))
            }
            Value::Array(a) if !a.is_empty() => {
                let k = rng.below(a.len());
                Some((k, &a[k]))
            }
            _ => None,
        };
        let Some((k, x)) = next else { break };
        path.push(k);
        cur = x;
    }
    let replacement = mutate_here(cur, rng);
    let mut slot = &mut v;
    for k in path {
        slot = match slot {
            Value::Object(m) => match m.values_mut().nth(k) {
                Some(x) => x,
                None => return v.clone(),
            },
            Value::Array(a) => &mut a[k],
            _ => return v.clone(),
        };
    }
    *slot = replacement;
    v
}

fn mutate_here(v: &Value, rng: &mut Rng) -> Value {
    let scalar = [
        Value::Null,
        json!(true),
        json!(0),
        json!(-1),
        json!(1.5),
        json!(""),
        json!("x"),
        json!("2026-13-01T00:00:00Z"),
        json!("not-a-uuid"),
        json!([]),
        json!({}),
    ];
    match v {
        Value::Object(m) if !m.is_empty() && rng.chance(0.6) => {
            let mut m = m.clone();
            if rng.chance(0.5) {
                let k = rng.below(m.len());
                let key = m.keys().nth(k).cloned().unwrap_or_default();
                m.shift_remove(&key);
            } else {
                m.insert("unexpected".to_owned(), rng.pick(&scalar).clone());
            }
            Value::Object(m)
        }
        Value::String(s) if rng.chance(0.5) => match rng.below(4) {
            0 => json!(""),
            1 => json!(format!("{s}{}", "y".repeat(300))),
            2 => json!(format!(" {s}")),
            _ => json!(s.to_uppercase()),
        },
        Value::Number(n) if rng.chance(0.5) => {
            let f = n.as_f64().unwrap_or(0.0);
            match rng.below(3) {
                0 => json!(-f - 1.0),
                1 => json!(f + 0.5),
                _ => json!(1e12),
            }
        }
        Value::Array(a) if rng.chance(0.5) => {
            if a.is_empty() || rng.chance(0.5) {
                let mut a = a.clone();
                a.push(a.first().cloned().unwrap_or(Value::Null));
                json!(a)
            } else {
                json!([])
            }
        }
        _ => rng.pick(&scalar).clone(),
    }
}
