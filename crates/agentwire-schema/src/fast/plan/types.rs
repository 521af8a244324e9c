//! The plan's data: nodes and their checks, the dispatch tables of unions, and the indexes of
//! object and enum checks, as the evaluator reads them.

use std::collections::HashMap;

use ahash::{AHashMap, AHashSet};
use serde_json::Value;

use crate::fast::ecma::{Format, Pattern};
use crate::fast::instance::Key;

/// Index of a node in [`Plan::nodes`].
pub(crate) type NodeId = u32;

/// Instance type bits, one per JSON type; `integer` is its own bit so that `type: integer` is a
/// single mask test.
pub(crate) const T_NULL: u8 = 1;
pub(crate) const T_BOOL: u8 = 2;
pub(crate) const T_INT: u8 = 4;
pub(crate) const T_NUM: u8 = 8;
pub(crate) const T_STR: u8 = 16;
pub(crate) const T_ARR: u8 = 32;
pub(crate) const T_OBJ: u8 = 64;
pub(crate) const T_ANY: u8 = 127;

/// Property names of one object schema beyond which the presence bitset lives on the heap.
pub(crate) const INLINE_NAME_BITS: usize = 256;

#[derive(Debug)]
pub(crate) struct Plan {
    pub(crate) nodes: Vec<Node>,
    /// Per node: where its chain of nodes that are a `$ref` alone ends (the node itself for
    /// any other node). Evaluation jumps there directly, so a chain of any length costs one
    /// step and no stack.
    pub(crate) alias: Vec<NodeId>,
    pub(crate) patterns: Vec<Pattern>,
    /// Schema pointer → node, for every schema compiled.
    pub(crate) by_pointer: HashMap<String, NodeId>,
}

#[derive(Debug, Default)]
pub(crate) struct Node {
    /// Allowed instance types (`T_ANY` when unconstrained).
    pub(crate) types: u8,
    /// Checks in the order AJV evaluates keywords, so that the first failure found while
    /// explaining matches AJV's first error.
    pub(crate) checks: Vec<Check>,
}

#[derive(Debug)]
pub(crate) enum Check {
    False,
    Ref(NodeId),
    ConstStr(Box<str>),
    Const(Value),
    Enum(Box<EnumSet>),
    Not(NodeId),
    AnyOf(Box<Union>),
    OneOf(Box<Union>),
    AllOf(Box<[NodeId]>),
    /// An `allOf` whose `if`/`then` members test one literal property: only the members whose
    /// `if` can hold for the instance's tag value are evaluated.
    AllOfTagged(Box<CondTable>),
    If {
        cond: NodeId,
        then: Option<NodeId>,
        otherwise: Option<NodeId>,
    },
    Num(Box<NumChecks>),
    Str(Box<StrChecks>),
    Arr(Box<ArrPlan>),
    Obj(Box<ObjPlan>),
}

#[derive(Debug, Default)]
pub(crate) struct EnumSet {
    pub(crate) strings: Vec<Box<str>>,
    pub(crate) string_set: Option<AHashSet<Box<str>>>,
    pub(crate) others: Vec<Value>,
}

impl EnumSet {
    pub(crate) fn contains_str(&self, s: &str) -> bool {
        match &self.string_set {
            Some(set) => set.contains(s),
            None => self.strings.iter().any(|c| &**c == s),
        }
    }
}

#[derive(Debug)]
pub(crate) struct Union {
    pub(crate) branches: Box<[NodeId]>,
    /// Type mask of each branch: a branch whose mask excludes the instance's type fails.
    pub(crate) masks: Box<[u8]>,
    /// Branches told apart by a literal string property.
    pub(crate) tag: Option<TagTable>,
}

#[derive(Debug)]
pub(crate) struct TagTable {
    pub(crate) property: Box<str>,
    /// Tag value → indexes into `branches` of the branches that can accept it.
    pub(crate) table: AHashMap<Box<str>, Vec<u32>>,
    /// Indexes of the branches that do not require the tag: the only ones an object without
    /// it can pass (every branch takes string literals alone for it, so an object whose tag is
    /// not a string passes none).
    pub(crate) absent: Vec<u32>,
}

#[derive(Debug)]
pub(crate) struct CondTable {
    /// Every member, in order (non-object instances and error reports use these).
    pub(crate) all: Box<[NodeId]>,
    /// Members that are not tag-guarded conditionals, evaluated always.
    pub(crate) others: Box<[NodeId]>,
    pub(crate) property: Box<str>,
    /// Tag value → the conditional members whose `if` accepts it.
    pub(crate) table: AHashMap<Box<str>, Vec<Guard>>,
}

/// A tag-dispatched conditional member of an `allOf`.
#[derive(Debug)]
pub(crate) struct Guard {
    pub(crate) member: NodeId,
    /// Its `if` read as lookups, when that `if` is an object schema of `properties` and
    /// `required` alone.
    pub(crate) cond: Option<FastCond>,
}

/// An `if` of `properties` and `required` alone, on an object: each named property is looked
/// up in the instance (instead of every member of the instance being matched against the
/// names), then `then` applies when it holds.
#[derive(Debug)]
pub(crate) struct FastCond {
    pub(crate) props: Box<[CondProp]>,
    pub(crate) then: NodeId,
}

/// A property an [`FastCond`] looks up.
#[derive(Debug)]
pub(crate) struct CondProp {
    pub(crate) name: Box<str>,
    /// Its schema under `properties`, if any.
    pub(crate) schema: Option<NodeId>,
    pub(crate) required: bool,
}

#[derive(Debug, Default)]
pub(crate) struct NumChecks {
    pub(crate) maximum: Option<f64>,
    pub(crate) minimum: Option<f64>,
    pub(crate) exclusive_maximum: Option<f64>,
    pub(crate) exclusive_minimum: Option<f64>,
    pub(crate) multiple_of: Option<f64>,
}

#[derive(Debug, Default)]
pub(crate) struct StrChecks {
    pub(crate) max_length: Option<usize>,
    pub(crate) min_length: Option<usize>,
    pub(crate) pattern: Option<u32>,
    pub(crate) format: Option<Format>,
}

#[derive(Debug)]
pub(crate) enum Rest {
    Any,
    Deny,
    Schema(NodeId),
}

#[derive(Debug)]
pub(crate) struct ArrPlan {
    pub(crate) max_items: Option<usize>,
    pub(crate) min_items: Option<usize>,
    pub(crate) unique: bool,
    pub(crate) prefix: Box<[NodeId]>,
    pub(crate) rest: Rest,
    /// Draft-07 `additionalItems` beside array-form `items`: AJV checks the extra items before
    /// the tuple, so the first error comes from them.
    pub(crate) rest_first: bool,
    pub(crate) contains: Option<NodeId>,
    pub(crate) min_contains: usize,
    pub(crate) max_contains: Option<usize>,
}

#[derive(Debug)]
pub(crate) struct ObjPlan {
    pub(crate) max_properties: Option<usize>,
    pub(crate) min_properties: Option<usize>,
    /// Every name the schema mentions (properties, required, dependencies), in first-seen order.
    pub(crate) names: Box<[Box<str>]>,
    pub(crate) lookup: Lookup,
    /// Schema of each name from `properties` (`None`: the name is not in `properties`).
    pub(crate) props: Box<[Option<NodeId>]>,
    /// Indexes of the required names, in schema order.
    pub(crate) required: Box<[u32]>,
    pub(crate) required_mask: [u64; INLINE_NAME_BITS / 64],
    pub(crate) property_names: Option<NodeId>,
    pub(crate) additional: Rest,
    pub(crate) pattern_props: Box<[(u32, NodeId)]>,
    pub(crate) dependent_required: Box<[(u32, Box<[u32]>)]>,
    pub(crate) dependent_schemas: Box<[(u32, NodeId)]>,
}

impl ObjPlan {
    pub(crate) fn index_of(&self, key: &str) -> Option<u32> {
        self.index_of_key(key)
    }

    /// [`ObjPlan::index_of`] of a [`Key`], whose text is made only for a name of eight bytes or
    /// more whose print matches (or for a large plan's hash lookup).
    #[inline]
    pub(crate) fn index_of_key<'a, K: Key<'a>>(&self, key: K) -> Option<u32> {
        match &self.lookup {
            Lookup::Linear(prints, bits) => {
                let print = key.print();
                if bits & print_bit(print) == 0 {
                    return None;
                }
                let short = print & 0xFF < 8;
                for (k, p) in prints.iter().enumerate() {
                    if *p == print
                        && (short || self.names.get(k).is_some_and(|n| **n == *key.text()))
                    {
                        return Some(k as u32);
                    }
                }
                None
            }
            Lookup::Hash(map) => map.get(key.text()).copied(),
        }
    }
}

#[derive(Debug)]
pub(crate) enum Lookup {
    /// Each name's [`key_print`], compared before the name itself, and the union of their
    /// [`print_bit`]s: a key whose bit is not in it is none of the names.
    Linear(Box<[u64]>, u64),
    Hash(AHashMap<Box<str>, u32>),
}

/// One of 64 bits picked by a print (for a set of names as one word).
#[inline]
pub(crate) fn print_bit(print: u64) -> u64 {
    1 << (print.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 58)
}
