//! Running a plan over an instance: the early-exit verdict ([`valid`]) here, and on the failure
//! path only, in `report`, the walk of a full report and the instance path of the first error
//! in AJV's evaluation order. All are generic over [`Instance`], so parsed values and the parse
//! tape share one evaluator.

use std::cell::{Cell, RefCell};
use std::cmp::Ordering;

use serde_json::Value;

use crate::fast::ecma::format_is_valid;
use crate::fast::instance::{Instance, Key, Kind};
use crate::fast::plan::{
    ArrPlan, Check, CondTable, Guard, INLINE_NAME_BITS, NodeId, NumChecks, ObjPlan, Plan, Rest,
    StrChecks, T_ARR, T_BOOL, T_INT, T_NULL, T_NUM, T_OBJ, T_STR, Union,
};
use crate::pointer;
use crate::validate::number::is_multiple_of;

mod report;

pub(crate) use report::{first_error, walk_all};

/// Nesting of schema evaluation (applicators and descents into the instance; a `$ref` alone
/// takes no level) beyond which a validation stops with [`EvalLimit::Depth`] rather than risk
/// the stack.
pub const MAX_EVAL_DEPTH: u32 = 1024;

/// Schema evaluation steps (one per subschema applied to a value) every validation may take,
/// whatever its size; with [`WALK_STEPS_PER_VALUE`] per value of the instance on top. A schema
/// whose applicators fan out (an `allOf` of two references to the next level, 40 levels deep,
/// is 2^40 steps on one value) stops with [`EvalLimit::Steps`] instead of running for hours.
pub const WALK_STEPS_BASE: u64 = 1_000_000;

/// Evaluation steps allowed per value of the instance, beyond [`WALK_STEPS_BASE`].
pub const WALK_STEPS_PER_VALUE: u64 = 1_000;

/// Verdicts a memoised validation keeps at most (one per subschema and value it evaluated); past
/// it, further subschemas are evaluated without being kept. About 32 MiB of table.
pub const MAX_MEMO_ENTRIES: usize = 1 << 20;

/// A bound a validation ran into before it could decide: the instance is then neither valid
/// nor invalid.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[non_exhaustive]
pub enum EvalLimit {
    /// Evaluation nested deeper than [`MAX_EVAL_DEPTH`].
    Depth,
    /// Evaluation took more steps than its budget ([`WALK_STEPS_BASE`],
    /// [`WALK_STEPS_PER_VALUE`]).
    Steps,
}

impl EvalLimit {
    /// Stable code of the limit, as an issue code.
    pub fn code(self) -> &'static str {
        match self {
            EvalLimit::Depth => "validate.depth-limit",
            EvalLimit::Steps => "validate.walk-budget",
        }
    }
}

thread_local! {
    /// Steps left to the validation running on this thread.
    static STEPS_LEFT: Cell<u64> = const { Cell::new(u64::MAX) };
    /// The first limit the validation running on this thread ran into.
    static LIMIT_HIT: Cell<Option<EvalLimit>> = const { Cell::new(None) };
    /// Whether the validation running on this thread keeps its verdicts in [`MEMO`].
    static MEMO_ON: Cell<bool> = const { Cell::new(false) };
    /// The verdict of each subschema (after `$ref` chains) on each value it was applied to, in
    /// the memoised validation running on this thread.
    static MEMO: RefCell<ahash::AHashMap<(NodeId, usize), bool>> =
        RefCell::new(ahash::AHashMap::new());
}

/// The step budget of a validation of an instance of `values` values.
pub(crate) fn budget(values: usize) -> u64 {
    WALK_STEPS_BASE.saturating_add(WALK_STEPS_PER_VALUE.saturating_mul(values as u64))
}

#[cold]
#[inline(never)]
fn hit(limit: EvalLimit) -> bool {
    if LIMIT_HIT.get().is_none() {
        LIMIT_HIT.set(Some(limit));
    }
    STEPS_LEFT.set(0);
    false
}

/// Takes one step of the running validation; `false` once a limit was hit.
#[inline(always)]
fn step(depth: u32) -> bool {
    let left = STEPS_LEFT.get();
    if left == 0 {
        return hit(EvalLimit::Steps);
    }
    if depth > MAX_EVAL_DEPTH {
        return hit(EvalLimit::Depth);
    }
    STEPS_LEFT.set(left - 1);
    true
}

/// Runs `f` as one validation with a budget of `steps`: its answer, or the limit it hit. A
/// limit hit anywhere decides (even under a `not`, whose answer it would otherwise flip).
pub(crate) fn bounded<T>(steps: u64, f: impl FnOnce() -> T) -> Result<T, EvalLimit> {
    let outer = (STEPS_LEFT.get(), LIMIT_HIT.get());
    STEPS_LEFT.set(steps);
    LIMIT_HIT.set(None);
    let answer = f();
    let limit = LIMIT_HIT.get();
    STEPS_LEFT.set(outer.0);
    LIMIT_HIT.set(outer.1);
    match limit {
        Some(limit) => Err(limit),
        None => Ok(answer),
    }
}

/// [`bounded`], deciding what fans out: when the plain run spends its budget, the validation
/// runs again with every subschema's verdict on each value kept and reused. The plan has no
/// keyword whose verdict depends on annotations of other subschemas (`unevaluated*` is not
/// compiled), so a subschema applied to one value always gives the same verdict, and an `allOf`
/// of two references to the next level, 30 levels deep, takes two steps a level instead of
/// 2^30. Only a run that spends its budget pays for the table.
pub(crate) fn decide<T>(steps: u64, f: impl Fn() -> T) -> Result<T, EvalLimit> {
    match bounded(steps, &f) {
        Err(EvalLimit::Steps) => memoised(steps, f),
        other => other,
    }
}

#[cold]
#[inline(never)]
fn memoised<T>(steps: u64, f: impl Fn() -> T) -> Result<T, EvalLimit> {
    let outer_on = MEMO_ON.replace(true);
    let outer = MEMO.take();
    let answer = bounded(steps, f);
    MEMO_ON.set(outer_on);
    MEMO.set(outer);
    answer
}

/// [`evaluate`] through the memo of the running validation.
#[cold]
#[inline(never)]
fn remembered<'a, I: Instance<'a>>(plan: &Plan, node: NodeId, i: I, id: usize, depth: u32) -> bool {
    if let Some(known) = MEMO.with_borrow(|memo| memo.get(&(node, id)).copied()) {
        return known;
    }
    let verdict = evaluate(plan, node, i, depth);
    // A verdict reached after a limit was hit means nothing (the run's answer is the limit).
    if LIMIT_HIT.get().is_none() {
        MEMO.with_borrow_mut(|memo| {
            if memo.len() < MAX_MEMO_ENTRIES {
                memo.insert((node, id), verdict);
            }
        });
    }
    verdict
}

/// Whether the running validation is memoised and already knows `node`'s verdict on `i`
/// (the failure path looks no further into a subschema that holds).
fn known_valid<'a, I: Instance<'a>>(plan: &Plan, node: NodeId, i: I, depth: u32) -> bool {
    MEMO_ON.get() && i.identity().is_some() && valid(plan, node, i, depth)
}

#[inline]
fn type_bits<'a, I: Instance<'a>>(i: I) -> u8 {
    match i.kind() {
        Kind::Null => T_NULL,
        Kind::Bool => T_BOOL,
        Kind::Number => {
            let f = i.as_f64();
            if f.fract() == 0.0 {
                T_NUM | T_INT
            } else {
                T_NUM
            }
        }
        Kind::String => T_STR,
        Kind::Array => T_ARR,
        Kind::Object => T_OBJ,
    }
}

/// JSON equality as AJV's `fast-deep-equal` sees it: numbers by value, object members in any
/// order.
pub(crate) fn equal_literal<'a, I: Instance<'a>>(lit: &Value, i: I) -> bool {
    match (lit, i.kind()) {
        (Value::Null, Kind::Null) => true,
        (Value::Bool(b), Kind::Bool) => *b == i.as_bool(),
        (Value::Number(n), Kind::Number) => n.as_f64() == Some(i.as_f64()),
        (Value::String(s), Kind::String) => s == i.as_str(),
        (Value::Array(a), Kind::Array) => {
            a.len() == i.len() && a.iter().zip(i.items()).all(|(l, x)| equal_literal(l, x))
        }
        (Value::Object(o), Kind::Object) => {
            o.len() == i.len()
                && i.entries()
                    .all(|(k, x)| o.get(k).is_some_and(|l| equal_literal(l, x)))
        }
        _ => false,
    }
}

/// Names seen in one object instance, for `required` and dependencies.
struct Seen {
    inline: [u64; INLINE_NAME_BITS / 64],
    heap: Vec<u64>,
}

impl Seen {
    #[inline]
    fn new(names: usize) -> Seen {
        Seen {
            inline: [0; INLINE_NAME_BITS / 64],
            heap: if names > INLINE_NAME_BITS {
                vec![0; names.div_ceil(64)]
            } else {
                Vec::new()
            },
        }
    }
    #[inline]
    fn set(&mut self, i: u32) {
        let i = i as usize;
        if self.heap.is_empty() {
            self.inline[i / 64] |= 1 << (i % 64);
        } else {
            self.heap[i / 64] |= 1 << (i % 64);
        }
    }
    #[inline]
    fn get(&self, i: u32) -> bool {
        let i = i as usize;
        let words = if self.heap.is_empty() {
            &self.inline[..]
        } else {
            &self.heap[..]
        };
        words[i / 64] & (1 << (i % 64)) != 0
    }
}

/// The verdict of `node` on `i`, stopping at the first failure.
#[inline]
pub(crate) fn valid<'a, I: Instance<'a>>(plan: &Plan, node: NodeId, i: I, depth: u32) -> bool {
    // A node that is a `$ref` alone is its target: go there directly. The hops take no stack,
    // so they take no depth either.
    let node = plan.alias[node as usize];
    if !step(depth) {
        return false;
    }
    if MEMO_ON.get()
        && let Some(id) = i.identity()
    {
        return remembered(plan, node, i, id, depth);
    }
    evaluate(plan, node, i, depth)
}

/// [`valid`] of a node that is not a `$ref` alone, its step taken.
fn evaluate<'a, I: Instance<'a>>(plan: &Plan, node: NodeId, i: I, depth: u32) -> bool {
    let n = &plan.nodes[node as usize];
    if n.types & type_bits(i) == 0 {
        return false;
    }
    for check in &n.checks {
        let ok = match check {
            Check::False => false,
            Check::Ref(target) => valid(plan, *target, i, depth + 1),
            Check::ConstStr(_) | Check::Const(_) | Check::Enum(_) => literal_ok(check, i),
            Check::Not(s) => !valid(plan, *s, i, depth + 1),
            Check::AnyOf(u) => any_of(plan, u, i, depth),
            Check::OneOf(u) => one_of(plan, u, i, depth),
            Check::AllOf(all) => all.iter().all(|s| valid(plan, *s, i, depth + 1)),
            Check::AllOfTagged(t) => all_of_tagged(plan, t, i, depth),
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
                branch.is_none_or(|s| valid(plan, s, i, depth + 1))
            }
            Check::Num(c) => i.kind() != Kind::Number || num_ok(c, i.as_f64()),
            Check::Str(c) => i.kind() != Kind::String || str_ok(plan, c, i.as_str()),
            Check::Arr(a) => i.kind() != Kind::Array || arr_ok(plan, a, i, depth),
            Check::Obj(o) => i.kind() != Kind::Object || obj_ok(plan, o, i, depth),
        };
        if !ok {
            return false;
        }
    }
    true
}

/// Number of values in `value` (itself included), counted without recursion.
pub(crate) fn count_values(value: &Value) -> usize {
    let mut count = 0;
    let mut stack = vec![value];
    while let Some(v) = stack.pop() {
        count += 1;
        match v {
            Value::Array(items) => stack.extend(items),
            Value::Object(map) => stack.extend(map.values()),
            _ => {}
        }
    }
    count
}

/// Branch indexes of a union worth trying on `i`, narrowed by the tag table when it applies.
#[inline]
fn tagged<'a, 'u, I: Instance<'a>>(u: &'u Union, i: I) -> Option<&'u [u32]> {
    let t = u.tag.as_ref()?;
    if i.kind() != Kind::Object {
        return None;
    }
    let Some(tag) = i.get(&t.property) else {
        return Some(&t.absent);
    };
    if tag.kind() != Kind::String {
        return Some(&[]);
    }
    Some(t.table.get(tag.as_str()).map_or(&[][..], Vec::as_slice))
}

fn any_of<'a, I: Instance<'a>>(plan: &Plan, u: &Union, i: I, depth: u32) -> bool {
    let bits = type_bits(i);
    if let Some(cands) = tagged(u, i) {
        return cands
            .iter()
            .any(|b| valid(plan, u.branches[*b as usize], i, depth + 1));
    }
    u.branches
        .iter()
        .zip(u.masks.iter())
        .any(|(b, m)| m & bits != 0 && valid(plan, *b, i, depth + 1))
}

fn one_of<'a, I: Instance<'a>>(plan: &Plan, u: &Union, i: I, depth: u32) -> bool {
    let bits = type_bits(i);
    let mut passing = 0;
    if let Some(cands) = tagged(u, i) {
        for b in cands {
            if valid(plan, u.branches[*b as usize], i, depth + 1) {
                passing += 1;
                if passing > 1 {
                    return false;
                }
            }
        }
        return passing == 1;
    }
    for (b, m) in u.branches.iter().zip(u.masks.iter()) {
        if m & bits != 0 && valid(plan, *b, i, depth + 1) {
            passing += 1;
            if passing > 1 {
                return false;
            }
        }
    }
    passing == 1
}

/// Members whose `if` demands another tag value (or a tag that is missing or not a string)
/// have a false condition and no `else`, so they hold without being evaluated.
fn all_of_tagged<'a, I: Instance<'a>>(plan: &Plan, t: &CondTable, i: I, depth: u32) -> bool {
    if i.kind() != Kind::Object {
        return t.all.iter().all(|s| valid(plan, *s, i, depth + 1));
    }
    if !t.others.iter().all(|s| valid(plan, *s, i, depth + 1)) {
        return false;
    }
    match i.get(&t.property) {
        Some(tag) if tag.kind() == Kind::String => t
            .table
            .get(tag.as_str())
            .is_none_or(|guards| guards.iter().all(|g| guard_holds(plan, g, i, depth + 1))),
        _ => true,
    }
}

/// [`valid`] of a guarded member (at `depth`) on an object instance: its `if` read as lookups
/// when it allows, with the depths `valid` would use, so the verdict is the same.
fn guard_holds<'a, I: Instance<'a>>(plan: &Plan, g: &Guard, i: I, depth: u32) -> bool {
    let Some(cond) = g.cond.as_ref().filter(|_| depth + 2 <= MAX_EVAL_DEPTH) else {
        return valid(plan, g.member, i, depth);
    };
    // The member's `if`/`then` node is the member itself once `$ref`s are followed; from there,
    // `if` at depth + 1, its properties at depth + 2, `then` at depth + 1.
    let holds = cond.props.iter().all(|p| match i.get(&p.name) {
        Some(v) => p.schema.is_none_or(|s| valid(plan, s, v, depth + 2)),
        None => !p.required,
    });
    !holds || valid(plan, cond.then, i, depth + 1)
}

#[inline]
fn num_ok(c: &NumChecks, f: f64) -> bool {
    c.maximum.is_none_or(|m| f <= m)
        && c.minimum.is_none_or(|m| f >= m)
        && c.exclusive_maximum.is_none_or(|m| f < m)
        && c.exclusive_minimum.is_none_or(|m| f > m)
        && c.multiple_of.is_none_or(|m| is_multiple_of(f, m))
}

/// Code points in `s`, counted only as far as a bound needs.
#[inline]
fn length_ok(c: &StrChecks, s: &str) -> bool {
    let bytes = s.len();
    let max_ok = c.max_length.is_none_or(|m| bytes <= m);
    let min_ok = c.min_length.is_none_or(|m| bytes / 4 >= m);
    if max_ok && min_ok {
        return true;
    }
    let n = s.chars().count();
    c.max_length.is_none_or(|m| n <= m) && c.min_length.is_none_or(|m| n >= m)
}

fn str_ok(plan: &Plan, c: &StrChecks, s: &str) -> bool {
    length_ok(c, s)
        && c.pattern
            .is_none_or(|p| plan.patterns[p as usize].is_match(s) == Some(true))
        && c.format.is_none_or(|f| format_is_valid(f, s))
}

fn unique<'a, I: Instance<'a>>(i: I) -> bool {
    let items: Vec<I> = i.items().collect();
    if items.iter().all(|x| x.kind() == Kind::String) {
        let mut seen = ahash::AHashSet::with_capacity(items.len());
        return items.iter().all(|x| seen.insert(x.as_str()));
    }
    // Sorted by an order in which equal values are neighbours: n·log n comparisons.
    let mut sorted = items;
    sorted.sort_unstable_by(|a, b| order(*a, *b));
    sorted
        .windows(2)
        .all(|w| order(w[0], w[1]) != Ordering::Equal)
}

/// A total order of JSON values that is `Equal` exactly for equal values (JSON Schema
/// equality, as AJV's `fast-deep-equal` has it): kinds first,
/// numbers by value, strings by bytes, arrays element by element, objects as their members
/// sorted by name.
fn order<'a, I: Instance<'a>>(a: I, b: I) -> Ordering {
    let rank = |k: Kind| k as u8;
    match (a.kind(), b.kind()) {
        (Kind::Null, Kind::Null) => Ordering::Equal,
        (Kind::Bool, Kind::Bool) => a.as_bool().cmp(&b.as_bool()),
        // Parsed numbers are never NaN; `0.0` and `-0.0` compare equal, as `equal` has them.
        (Kind::Number, Kind::Number) => a
            .as_f64()
            .partial_cmp(&b.as_f64())
            .unwrap_or(Ordering::Equal),
        (Kind::String, Kind::String) => a.as_str().cmp(b.as_str()),
        (Kind::Array, Kind::Array) => {
            for (x, y) in a.items().zip(b.items()) {
                let o = order(x, y);
                if o != Ordering::Equal {
                    return o;
                }
            }
            a.len().cmp(&b.len())
        }
        (Kind::Object, Kind::Object) => {
            let members = |o: I| {
                let mut m: Vec<(&'a str, I)> = o.entries().collect();
                m.sort_unstable_by(|x, y| x.0.cmp(y.0));
                m
            };
            let (x, y) = (members(a), members(b));
            for ((kx, vx), (ky, vy)) in x.iter().zip(&y) {
                let o = kx.cmp(ky).then_with(|| order(*vx, *vy));
                if o != Ordering::Equal {
                    return o;
                }
            }
            x.len().cmp(&y.len())
        }
        (ka, kb) => rank(ka).cmp(&rank(kb)),
    }
}

#[inline(never)]
fn arr_ok<'a, I: Instance<'a>>(plan: &Plan, a: &ArrPlan, i: I, depth: u32) -> bool {
    let len = i.len();
    if a.max_items.is_some_and(|m| len > m) || a.min_items.is_some_and(|m| len < m) {
        return false;
    }
    if a.unique && len > 1 && !unique(i) {
        return false;
    }
    for (k, item) in i.items().enumerate() {
        let ok = match a.prefix.get(k) {
            Some(s) => valid(plan, *s, item, depth + 1),
            None => match a.rest {
                Rest::Any => true,
                Rest::Deny => false,
                Rest::Schema(s) => valid(plan, s, item, depth + 1),
            },
        };
        if !ok {
            return false;
        }
    }
    if let Some(c) = a.contains {
        let n = i.items().filter(|x| valid(plan, c, *x, depth + 1)).count();
        if n < a.min_contains || a.max_contains.is_some_and(|m| n > m) {
            return false;
        }
    }
    true
}

#[inline(never)]
fn obj_ok<'a, I: Instance<'a>>(plan: &Plan, o: &ObjPlan, i: I, depth: u32) -> bool {
    let len = i.len();
    if o.max_properties.is_some_and(|m| len > m) || o.min_properties.is_some_and(|m| len < m) {
        return false;
    }
    let mut seen = Seen::new(o.names.len());
    for (key, value) in i.keyed_entries() {
        let mut declared = false;
        if let Some(k) = o.index_of_key(key) {
            seen.set(k);
            if let Some(s) = o.props[k as usize] {
                declared = true;
                if !valid(plan, s, value, depth + 1) {
                    return false;
                }
            }
        }
        let mut matched = false;
        for (p, s) in o.pattern_props.iter() {
            match plan.patterns[*p as usize].is_match(key.text()) {
                Some(true) => {
                    matched = true;
                    if !valid(plan, *s, value, depth + 1) {
                        return false;
                    }
                }
                Some(false) => {}
                // Whether the schema applies is unknown: invalid, as the report says.
                None => return false,
            }
        }
        if !declared && !matched {
            match o.additional {
                Rest::Any => {}
                Rest::Deny => return false,
                Rest::Schema(s) => {
                    if !valid(plan, s, value, depth + 1) {
                        return false;
                    }
                }
            }
        }
        if let Some(pn) = o.property_names
            && !valid(plan, pn, KeyInstance(key.text()), depth + 1)
        {
            return false;
        }
    }
    if o.names.len() <= INLINE_NAME_BITS {
        for (w, m) in seen.inline.iter().zip(o.required_mask.iter()) {
            if w & m != *m {
                return false;
            }
        }
    } else if !o.required.iter().all(|r| seen.get(*r)) {
        return false;
    }
    for (k, deps) in o.dependent_required.iter() {
        if seen.get(*k) && !deps.iter().all(|d| seen.get(*d)) {
            return false;
        }
    }
    for (k, s) in o.dependent_schemas.iter() {
        if seen.get(*k) && !valid(plan, *s, i, depth + 1) {
            return false;
        }
    }
    true
}

/// A property name seen as a string instance (for `propertyNames`).
#[derive(Clone, Copy)]
struct KeyInstance<'a>(&'a str);

impl<'a> Instance<'a> for KeyInstance<'a> {
    type Items = std::iter::Empty<KeyInstance<'a>>;
    type Entries = std::iter::Empty<(&'a str, KeyInstance<'a>)>;
    type Key = &'a str;
    type KeyedEntries = std::iter::Empty<(&'a str, KeyInstance<'a>)>;
    fn kind(self) -> Kind {
        Kind::String
    }
    fn as_bool(self) -> bool {
        false
    }
    fn as_f64(self) -> f64 {
        f64::NAN
    }
    fn as_str(self) -> &'a str {
        self.0
    }
    fn items(self) -> Self::Items {
        std::iter::empty()
    }
    fn len(self) -> usize {
        0
    }
    fn entries(self) -> Self::Entries {
        std::iter::empty()
    }
    fn keyed_entries(self) -> Self::KeyedEntries {
        std::iter::empty()
    }
    fn get(self, _key: &str) -> Option<Self> {
        None
    }
    fn identity(self) -> Option<usize> {
        // A name is checked by `propertyNames` once per member: nothing to share.
        None
    }
}

#[inline]
fn literal_ok<'a, I: Instance<'a>>(check: &Check, i: I) -> bool {
    match check {
        Check::ConstStr(s) => i.kind() == Kind::String && i.as_str() == &**s,
        Check::Const(v) => equal_literal(v, i),
        Check::Enum(e) => {
            if i.kind() == Kind::String {
                e.contains_str(i.as_str())
            } else {
                e.others.iter().any(|v| equal_literal(v, i))
            }
        }
        _ => true,
    }
}
