//! Seeded message generation for a schema: instances that aim to be valid (following refs,
//! unions, formats and patterns) and mutations of them that aim to break one thing. Tests and
//! benchmarks share it, so both see the same messages for the same seed.
//!
//! This module holds the seeded `Rng`, the `Size` of messages and the `Generator` with its
//! limits; `walk.rs` follows a schema's references, unions and conditionals down to an instance
//! type, `values.rs` generates the value of each type, `pattern.rs` strings for patterns, and
//! `mutate.rs` breaks a generated value in one place.

mod mutate;
mod pattern;
mod values;
mod walk;

use std::cell::{Cell, RefCell};
use std::collections::HashMap;

use serde_json::Value;

use crate::document::SchemaDocument;
use pattern::PatternGen;

pub use mutate::mutate;
pub use pattern::string_for_pattern;

/// A small, fast, seeded pseudo-random generator (SplitMix64); the same seed gives the same
/// sequence on every platform.
#[derive(Debug, Clone)]
pub struct Rng(u64);

impl Rng {
    /// A generator from a seed.
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    /// The next 64 random bits.
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    /// A number in `0..n` (0 when `n` is 0).
    pub fn below(&mut self, n: usize) -> usize {
        if n == 0 {
            0
        } else {
            (self.next_u64() % n as u64) as usize
        }
    }

    /// True with probability `p`.
    pub fn chance(&mut self, p: f64) -> bool {
        (self.next_u64() >> 11) as f64 / (1u64 << 53) as f64 <= p
    }

    /// One element of a non-empty slice.
    pub fn pick<'s, T>(&mut self, items: &'s [T]) -> &'s T {
        &items[self.below(items.len())]
    }
}

/// How big generated messages are.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Size {
    /// Required members, some optional ones, short strings and arrays.
    Small,
    /// Every optional member, long arrays and strings.
    Large,
}

/// Nesting beyond which only required members and minimal arrays are generated.
const GEN_DEPTH_SOFT: usize = 8;
/// Nesting beyond which generation gives `null` (a schema may recurse without end).
const GEN_DEPTH_HARD: usize = 24;

/// Generates instances of the schemas of one document.
#[derive(Debug)]
pub struct Generator<'d> {
    doc: &'d SchemaDocument,
    size: Size,
    /// Compiled patterns (checker and producer) by source, so each is built once.
    patterns: RefCell<HashMap<String, Option<PatternGen>>>,
    /// Values still to be generated in the current instance before generation turns minimal.
    budget: Cell<usize>,
}

/// Values generated per instance before only required members and minimal arrays follow.
const SMALL_BUDGET: usize = 40;
const LARGE_BUDGET: usize = 2_500;

impl<'d> Generator<'d> {
    /// A generator for `doc`.
    pub fn new(doc: &'d SchemaDocument, size: Size) -> Generator<'d> {
        Generator {
            doc,
            size,
            patterns: RefCell::new(HashMap::new()),
            budget: Cell::new(0),
        }
    }

    /// An instance of the schema at JSON Pointer `ptr` that aims to be valid.
    pub fn instance(&self, ptr: &str, rng: &mut Rng) -> Value {
        self.budget.set(match self.size {
            Size::Small => SMALL_BUDGET,
            Size::Large => LARGE_BUDGET,
        });
        match self.doc.resolve_pointer(ptr) {
            Some(schema) => self.generate(schema, ptr, rng, 0),
            None => Value::Null,
        }
    }

    /// Whether generation should stay minimal here (deep, or out of budget).
    fn minimal(&self, depth: usize) -> bool {
        depth > GEN_DEPTH_SOFT || self.budget.get() == 0
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn same_seed_same_messages() {
        let doc = SchemaDocument::from_value(json!({
            "type": "object",
            "required": ["id", "kind"],
            "properties": {
                "id": {"type": "string", "pattern": "^[a-f0-9]{8}$"},
                "kind": {"enum": ["a", "b"]},
                "when": {"type": "string", "format": "date-time"},
                "n": {"type": "integer", "minimum": 3, "maximum": 9}
            },
            "additionalProperties": false
        }))
        .unwrap();
        let g = Generator::new(&doc, Size::Small);
        let a: Vec<Value> = (0..20).map(|i| g.instance("", &mut Rng::new(i))).collect();
        let b: Vec<Value> = (0..20).map(|i| g.instance("", &mut Rng::new(i))).collect();
        assert_eq!(a, b);
        let fast = crate::fast::FastSchema::compile(&doc).unwrap();
        for v in &a {
            assert!(fast.is_valid(fast.root(), v), "{v}");
        }
    }
}
