//! The `pattern` keyword with ECMA-262 semantics: patterns are compiled as JavaScript
//! `RegExp(source, "u")` (what AJV and the peers' own validators run), not as Rust regexes.
//!
//! Protocol schemas are written for JavaScript validators and use what only ECMA-262 accepts,
//! e.g. OpenClaw's `[^\uD800-\uDFFF]` surrogate classes, and `\d`, `\w`, `\s` and `$` mean what
//! they mean in JavaScript.

use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

use super::message;
use crate::fast::ecma::{PATTERN_BACKTRACK_LIMIT, Pattern};

/// Flags every `pattern` is compiled with: Unicode mode, as AJV compiles them.
const PATTERN_FLAGS: &str = "u";

/// How a budget give-up's message starts, so that the report tells it from a non-match.
pub(super) const BUDGET_MESSAGE_START: &str = "the pattern gave up after";

/// A compiled `pattern`: translated to Rust syntax, so it runs in linear time, or under a
/// backtracking budget ([`PATTERN_BACKTRACK_LIMIT`]) where it needs backreferences or
/// lookaround.
pub(super) struct EcmaPattern {
    source: String,
    pattern: Pattern,
}

impl EcmaPattern {
    /// Compiles `source`; an error for what is not ECMA-262 syntax, and for the rare forms the
    /// translation cannot carry to a bounded engine (a backreference inside a lookbehind, which
    /// ECMA-262 matches backwards): an ECMA-262 backtracking engine would run them with no
    /// bound on its steps.
    pub(super) fn compile(source: &str) -> Result<Self, String> {
        regress::Regex::with_flags(source, PATTERN_FLAGS).map_err(|e| e.to_string())?;
        let pattern = Pattern::new(source).map_err(|e| {
            format!("{UNBOUNDED_MESSAGE_START} ({e}), and an ECMA-262 backtracking engine would run it with no bound on its steps")
        })?;
        Ok(EcmaPattern {
            source: source.to_owned(),
            pattern,
        })
    }

    /// Unanchored search, like `RegExp.prototype.test`; `None` when the backtracking budget
    /// ([`PATTERN_BACKTRACK_LIMIT`]) ran out first.
    pub(super) fn is_match(&self, text: &str) -> Option<bool> {
        self.pattern.is_match(text)
    }
}

/// How the compile error of a valid ECMA-262 pattern no bounded engine runs starts.
pub(super) const UNBOUNDED_MESSAGE_START: &str =
    "the pattern cannot be run by the linear-time or the step-budgeted engine";

/// The sentence of a pattern that gave up on `instance`.
pub(super) fn budget_message(instance: &Value, source: &str) -> String {
    format!(
        "{BUDGET_MESSAGE_START} {PATTERN_BACKTRACK_LIMIT} backtracking steps on {} without deciding whether it matches {source}",
        message::preview(instance)
    )
}

impl<'i> Keyword<'i> for EcmaPattern {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        let Value::String(text) = instance else {
            return Ok(());
        };
        match self.is_match(text) {
            Some(true) => Ok(()),
            Some(false) => Err(ValidationError::custom(format!(
                "{} does not match the pattern {}",
                message::preview(instance),
                self.source
            ))),
            None => Err(ValidationError::custom(budget_message(
                instance,
                &self.source,
            ))),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        match instance {
            Value::String(text) => self.is_match(text) == Some(true),
            _ => true,
        }
    }
}

/// The factory registered for `pattern`.
pub(super) fn factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    location: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    let Value::String(source) = value else {
        return Err(ValidationError::schema(format!(
            "`pattern` at {} must be a string",
            location.as_str()
        )));
    };
    EcmaPattern::compile(source)
        .map(|p| Box::new(p) as Box<dyn for<'i> Keyword<'i>>)
        .map_err(|e| {
            ValidationError::schema(format!(
                "`pattern` at {} is not an ECMA-262 regular expression: {source:?}: {e}",
                location.as_str()
            ))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn javascript_semantics() {
        let p = EcmaPattern::compile(
            r"^(?!\.{1,2}$)(?:[^\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])+$",
        )
        .unwrap();
        assert_eq!(p.is_match("abc"), Some(true));
        assert_eq!(p.is_match("a😀b"), Some(true));
        assert_eq!(p.is_match(".."), Some(false));
        assert_eq!(p.is_match(""), Some(false));
        // `$` does not match before a final line feed (Python's `re` does).
        let p = EcmaPattern::compile("^[a-z]+$").unwrap();
        assert_eq!(p.is_match("abc\n"), Some(false));
        // `\s` is ECMA-262 white space: it includes U+FEFF.
        let p = EcmaPattern::compile(r"\S").unwrap();
        assert_eq!(p.is_match("\u{feff} "), Some(false));
        // `\d` is ASCII only.
        let p = EcmaPattern::compile(r"^\d$").unwrap();
        assert_eq!(p.is_match("٣"), Some(false));
        assert!(EcmaPattern::compile("(").is_err());
    }

    #[test]
    fn translated_forms_keep_their_ecma_meaning() {
        let cases: &[(&str, &str, bool)] = &[
            (r"\bab\b", "x ab y", true),
            (r"\bab\b", "xaby", false),
            (r"a\B", "ab", true),
            (r"^[\D]+$", "ab", true),
            (r"^[\D]+$", "a1", false),
            (r"^[x\S]$", " ", false),
            (r"^[^\W]$", "é", false),
            (r"^(?<q>a)\k<q>$", "aa", true),
            (r"^(?<q>a)\k<q>$", "ab", false),
            // A reference to a group that has not participated matches the empty string.
            (r"^(?:(a)|b)\1$", "b", true),
            (r"^(?:(a)|b)\1$", "aa", true),
            (r"^(?:(a)|b)\1$", "a", false),
            (r"^(?:(?<n>a)|b)\k<n>c$", "bc", true),
            // So does one to a group that opens later.
            (r"^\k<x>(?<x>a)$", "a", true),
            (r"^\k<x>(?<x>a)$", "aa", false),
            (r"^\2(a)(b)$", "ab", true),
            (r"^(a\1)$", "a", true),
            (r"^(?:\1(a))+$", "aa", true),
            (r"\uD800", "\u{10000}", false),
        ];
        for (source, text, expected) in cases {
            let p = EcmaPattern::compile(source).unwrap();
            let ecma = regress::Regex::with_flags(source, PATTERN_FLAGS).unwrap();
            assert_eq!(
                ecma.find(text).is_some(),
                *expected,
                "regress {source} {text}"
            );
            assert_eq!(p.is_match(text), Some(*expected), "{source} {text}");
        }
    }

    #[test]
    fn properties_rust_lacks_are_classes_of_the_same_code_points() {
        let ecma = |source: &str| regress::Regex::with_flags(source, PATTERN_FLAGS).unwrap();
        for source in [
            r"^\p{Changes_When_NFKC_Casefolded}+$",
            r"^\P{Changes_When_NFKC_Casefolded}+$",
            r"^[x\p{Changes_When_NFKC_Casefolded}]$",
            r"^[^\P{Changes_When_NFKC_Casefolded}]$",
        ] {
            let p = EcmaPattern::compile(source).unwrap();
            let r = ecma(source);
            for text in [
                "A",
                "a",
                "x",
                "\u{00AD}",
                "\u{2126}",
                "\u{FFFF}",
                "\u{E000}",
                "\u{1D400}",
                "1",
            ] {
                assert_eq!(
                    p.is_match(text),
                    Some(r.find(text).is_some()),
                    "{source} {text:?}"
                );
            }
        }
    }

    #[test]
    fn what_no_bounded_engine_runs_is_refused_when_compiled() {
        // A lookbehind matches backwards in ECMA-262 (a reference in it sees the groups to its
        // right); the backtracking engine matches it forwards.
        for source in [r"(?<=(a)\1)b", r"(?<=\k<x>(?<x>a))b|^(a+)+$"] {
            let err = EcmaPattern::compile(source).err().unwrap();
            assert!(err.starts_with(UNBOUNDED_MESSAGE_START), "{err}");
            assert!(err.contains("inside a lookbehind"), "{err}");
        }
    }
}
