//! Strings for ECMA-262 patterns: the pattern translated (lookaround removed, since it
//! constrains but does not produce), a string emitted from its syntax tree, and kept only when
//! the pattern's own checker accepts it.

use regex_syntax::hir::{Class, Hir, HirKind};

use super::Rng;
use crate::fast::ecma;
/// Attempts at a string that matches a pattern with lookaround.
pub(super) const PATTERN_ATTEMPTS: usize = 8;

/// What it takes to produce strings for one pattern: the checker and the producing expression.
#[derive(Debug)]
pub(super) struct PatternGen {
    checker: ecma::Pattern,
    hir: Hir,
}

impl PatternGen {
    pub(super) fn new(source: &str) -> Option<PatternGen> {
        let checker = ecma::Pattern::new(source).ok()?;
        let translated = ecma::translate(&strip_lookaround(source)).ok()?;
        let hir = regex_syntax::ParserBuilder::new()
            .build()
            .parse(&translated)
            .ok()?;
        Some(PatternGen { checker, hir })
    }

    pub(super) fn produce(&self, rng: &mut Rng) -> Option<String> {
        for _ in 0..PATTERN_ATTEMPTS {
            let mut out = String::new();
            emit(&self.hir, rng, &mut out);
            if self.checker.is_match(&out) == Some(true) {
                return Some(out);
            }
        }
        None
    }
}

/// A string matching a JavaScript pattern, when one can be built.
pub fn string_for_pattern(source: &str, rng: &mut Rng) -> Option<String> {
    PatternGen::new(source)?.produce(rng)
}

/// Removes `(?=…)`, `(?!…)`, `(?<=…)` and `(?<!…)` groups, which constrain but do not produce.
fn strip_lookaround(source: &str) -> String {
    let chars: Vec<char> = source.chars().collect();
    let mut out = String::new();
    let mut i = 0;
    while i < chars.len() {
        let rest: String = chars[i..chars.len().min(i + 4)].iter().collect();
        let look = rest.starts_with("(?=")
            || rest.starts_with("(?!")
            || rest.starts_with("(?<=")
            || rest.starts_with("(?<!");
        if look {
            let mut depth = 0;
            while i < chars.len() {
                match chars[i] {
                    '\\' => i += 1,
                    '(' => depth += 1,
                    ')' => {
                        depth -= 1;
                        if depth == 0 {
                            i += 1;
                            break;
                        }
                    }
                    _ => {}
                }
                i += 1;
            }
            continue;
        }
        if chars[i] == '\\' && i + 1 < chars.len() {
            out.push(chars[i]);
            out.push(chars[i + 1]);
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Upper bound on the repetitions generated for an unbounded `*` or `+`.
const REPEAT_SPREAD: u32 = 6;

fn emit(hir: &Hir, rng: &mut Rng, out: &mut String) {
    match hir.kind() {
        HirKind::Empty | HirKind::Look(_) => {}
        HirKind::Literal(lit) => out.push_str(&String::from_utf8_lossy(&lit.0)),
        HirKind::Class(Class::Unicode(c)) => {
            let ranges = c.ranges();
            if ranges.is_empty() {
                return;
            }
            // Prefer printable ASCII when the class has it, so messages stay readable.
            let ascii: Vec<_> = ranges
                .iter()
                .filter(|r| r.start() <= '~' && r.end() >= ' ')
                .collect();
            let r = if !ascii.is_empty() && rng.chance(0.9) {
                **rng.pick(&ascii)
            } else {
                *rng.pick(ranges)
            };
            let (lo, hi) = if r.start() <= '~' && r.end() >= ' ' {
                ((r.start() as u32).max(0x20), (r.end() as u32).min(0x7E))
            } else {
                (r.start() as u32, r.end() as u32)
            };
            let span = (hi - lo).min(1 << 20);
            let mut cp = lo + rng.below(span as usize + 1) as u32;
            while char::from_u32(cp).is_none() {
                cp += 1;
            }
            out.push(char::from_u32(cp).unwrap_or('x'));
        }
        HirKind::Class(Class::Bytes(c)) => {
            if let Some(r) = c.ranges().first() {
                out.push(char::from(r.start()));
            }
        }
        HirKind::Repetition(rep) => {
            let max = rep
                .max
                .unwrap_or(rep.min + REPEAT_SPREAD)
                .min(rep.min + REPEAT_SPREAD);
            let n = rep.min + rng.below((max - rep.min) as usize + 1) as u32;
            for _ in 0..n {
                emit(&rep.sub, rng, out);
            }
        }
        HirKind::Capture(c) => emit(&c.sub, rng, out),
        HirKind::Concat(parts) => parts.iter().for_each(|p| emit(p, rng, out)),
        HirKind::Alternation(alts) => emit(rng.pick(alts), rng, out),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_strings_match() {
        let mut rng = Rng::new(7);
        for p in [
            r"^[a-z][a-z0-9-]{0,31}$",
            r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
            r"^UTC[+-]\d{1,2}(?::[0-5]\d)?$",
        ] {
            let s = string_for_pattern(p, &mut rng).unwrap();
            assert!(
                ecma::Pattern::new(p).unwrap().is_match(&s).unwrap(),
                "{p} {s}"
            );
        }
    }
}
