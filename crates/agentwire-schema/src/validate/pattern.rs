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

/// Flags every `pattern` is compiled with: Unicode mode, as AJV compiles them.
const PATTERN_FLAGS: &str = "u";

/// A compiled `pattern`.
pub(super) struct EcmaPattern {
    source: String,
    regex: regress::Regex,
}

impl EcmaPattern {
    pub(super) fn compile(source: &str) -> Result<Self, String> {
        regress::Regex::with_flags(source, PATTERN_FLAGS)
            .map(|regex| EcmaPattern {
                source: source.to_owned(),
                regex,
            })
            .map_err(|e| e.to_string())
    }

    /// Unanchored search, like `RegExp.prototype.test`.
    pub(super) fn is_match(&self, text: &str) -> bool {
        self.regex.find(text).is_some()
    }
}

impl<'i> Keyword<'i> for EcmaPattern {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        match instance {
            Value::String(text) if !self.is_match(text) => Err(ValidationError::custom(format!(
                "{} does not match the pattern {}",
                message::preview(instance),
                self.source
            ))),
            _ => Ok(()),
        }
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        match instance {
            Value::String(text) => self.is_match(text),
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
        assert!(p.is_match("abc"));
        assert!(p.is_match("a😀b"));
        assert!(!p.is_match(".."));
        assert!(!p.is_match(""));
        // `$` does not match before a final line feed (Python's `re` does).
        let p = EcmaPattern::compile("^[a-z]+$").unwrap();
        assert!(!p.is_match("abc\n"));
        // `\s` is ECMA-262 white space: it includes U+FEFF.
        let p = EcmaPattern::compile(r"\S").unwrap();
        assert!(!p.is_match("\u{feff} "));
        // `\d` is ASCII only.
        let p = EcmaPattern::compile(r"^\d$").unwrap();
        assert!(!p.is_match("٣"));
        assert!(EcmaPattern::compile("(").is_err());
    }
}
