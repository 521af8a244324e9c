//! Recursion in the IR: which types reach themselves by direct containment (a box in languages
//! with inline storage) and which form long reference cycles (a drop-check cut in Rust), found
//! as strongly connected components of the type graph once lowering is done.

use std::collections::BTreeSet;

use super::LONG_CYCLE;
use super::types::{Extra, Ir, Ty, TypeKind};

impl Ir {
    /// Whether a value of type `target` held directly (not through an array or map) inside
    /// `owner` closes a cycle of direct containment, so languages with inline storage need a box.
    pub fn needs_indirection(&self, owner: &str, target: &Ty) -> bool {
        let Some(&owner_scc) = self.cyclic.get(owner) else {
            return false;
        };
        match target {
            Ty::Ref(name) => self.cyclic.get(name) == Some(&owner_scc),
            Ty::Nullable(inner) => self.needs_indirection(owner, inner),
            _ => false,
        }
    }

    /// Whether a value of type `target` (a reference, however deeply inside arrays, maps or
    /// `null`) held by `owner` is an edge of a long reference cycle ([`LONG_CYCLE`] or more
    /// types, through any containment): Rust's drop check walks such a chain one type at a time
    /// and overflows its recursion limit (E0320) unless the chain is cut by a wrapper with its
    /// own destructor.
    pub fn in_long_cycle(&self, owner: &str, target: &str) -> bool {
        match (self.long_cycles.get(owner), self.long_cycles.get(target)) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    }

    /// Whether any type is part of a long reference cycle (see [`Ir::in_long_cycle`]).
    pub fn has_long_cycles(&self) -> bool {
        !self.long_cycles.is_empty()
    }

    pub(super) fn compute_cycles(&mut self) {
        let direct = self.successors(false);
        for (id, members) in strongly_connected(&direct).into_iter().enumerate() {
            for m in members {
                self.cyclic.insert(self.types[m].name.clone(), id);
            }
        }
        let any = self.successors(true);
        for (id, members) in strongly_connected(&any)
            .into_iter()
            .filter(|m| m.len() >= LONG_CYCLE)
            .enumerate()
        {
            for m in members {
                self.long_cycles.insert(self.types[m].name.clone(), id);
            }
        }
    }

    /// The types each type refers to: directly (through `null` only), or with `through_all`
    /// also through arrays, maps and typed extra properties.
    fn successors(&self, through_all: bool) -> Vec<Vec<usize>> {
        self.types
            .iter()
            .map(|t| {
                let mut out = BTreeSet::new();
                let mut add = |ty: &Ty| {
                    let mut ty = ty;
                    loop {
                        match ty {
                            Ty::Nullable(inner) => ty = inner,
                            Ty::Array(inner) | Ty::Map(inner) if through_all => ty = inner,
                            _ => break,
                        }
                    }
                    if let Ty::Ref(name) = ty
                        && let Some(&i) = self.index.get(name)
                    {
                        out.insert(i);
                    }
                };
                match &t.kind {
                    TypeKind::Object(o) => {
                        o.fields.iter().for_each(|f| add(&f.ty));
                        if let (Extra::Typed(ty), true) = (&o.extra, through_all) {
                            add(ty);
                        }
                    }
                    TypeKind::Union(u) => u.variants.iter().for_each(|v| add(&v.ty)),
                    TypeKind::Alias(ty) => add(ty),
                    TypeKind::Enum(_) => {}
                }
                out.into_iter().collect()
            })
            .collect()
    }
}

/// The cyclic strongly connected components of a graph (Tarjan's algorithm, iteratively, so a
/// long chain cannot overflow the stack): each has several members or a self-edge.
fn strongly_connected(succ: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let n = succ.len();
    let mut out = Vec::new();
    let mut index = vec![usize::MAX; n];
    let mut low = vec![0usize; n];
    let mut on_stack = vec![false; n];
    let mut stack = Vec::new();
    let mut counter = 0usize;
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work: Vec<(usize, usize)> = vec![(start, 0)];
        index[start] = counter;
        low[start] = counter;
        counter += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut next)) = work.last_mut() {
            if *next < succ[v].len() {
                let w = succ[v][*next];
                *next += 1;
                if index[w] == usize::MAX {
                    index[w] = counter;
                    low[w] = counter;
                    counter += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    let mut members = Vec::new();
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        members.push(w);
                        if w == v {
                            break;
                        }
                    }
                    if members.len() > 1 || succ[v].contains(&v) {
                        members.sort_unstable();
                        out.push(members);
                    }
                }
            }
        }
    }
    out
}
