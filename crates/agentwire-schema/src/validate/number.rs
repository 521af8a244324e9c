//! The `multipleOf` keyword as AJV and Python `jsonschema` decide it, shared by the fast path
//! and the report pass so that both give one verdict.
//!
//! A number `x` is a multiple of `m` when the double quotient `x / m` is a finite integer: `0.3`
//! is not a multiple of `0.1` (`0.3 / 0.1` is `2.9999999999999996`), `0.2` is. This is AJV's
//! `x / m !== parseInt(x / m)` and Python `jsonschema`'s `int(x / m) != x / m` for a float
//! `multipleOf`. They part only beyond what a double counts exactly: AJV rejects every quotient
//! of 10^21 or more (`parseInt` reads its exponent notation), Python decides an infinite
//! quotient with exact fractions; here an infinite quotient fails and a finite integral one of
//! any size passes.

use jsonschema::paths::Location;
use jsonschema::{Keyword, ValidationError};
use serde_json::{Map, Value};

use super::message;

/// Whether `x` is a multiple of `m` (`m > 0`, which loading a document guarantees).
#[inline]
pub(crate) fn is_multiple_of(x: f64, m: f64) -> bool {
    let q = x / m;
    q.is_finite() && q.fract() == 0.0
}

/// A compiled `multipleOf`.
pub(super) struct MultipleOf {
    /// The keyword's value as written, for the message.
    written: Value,
    divisor: f64,
}

impl<'i> Keyword<'i> for MultipleOf {
    fn validate(&self, instance: &'i Value) -> Result<(), ValidationError<'i>> {
        if self.is_valid(instance) {
            return Ok(());
        }
        Err(ValidationError::custom(format!(
            "{} is not a multiple of {}",
            message::preview(instance),
            self.written
        )))
    }

    fn is_valid(&self, instance: &'i Value) -> bool {
        match instance {
            Value::Number(n) => n.as_f64().is_some_and(|x| is_multiple_of(x, self.divisor)),
            _ => true,
        }
    }
}

/// The factory registered for `multipleOf`.
pub(super) fn factory<'a>(
    _parent: &'a Map<String, Value>,
    value: &'a Value,
    location: Location,
) -> Result<Box<dyn for<'i> Keyword<'i>>, ValidationError<'a>> {
    match value.as_f64() {
        Some(divisor) if divisor > 0.0 => Ok(Box::new(MultipleOf {
            written: value.clone(),
            divisor,
        })),
        _ => Err(ValidationError::schema(format!(
            "`multipleOf` at {} must be a number greater than 0",
            location.as_str()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The verdicts of AJV 8 and Python `jsonschema` 4 on these (both agree on each).
    #[test]
    fn decides_like_ajv_and_python() {
        for (x, m, expected) in [
            (0.3, 0.1, false),
            (0.7, 0.1, false),
            (3.3000000000000003, 0.1, true),
            (0.2, 0.1, true),
            (4.5, 1.5, true),
            (7.0, 2.0, false),
            (-6.0, 3.0, true),
            (1e308, 1e-308, false),
            (0.0, 0.1, true),
        ] {
            assert_eq!(is_multiple_of(x, m), expected, "{x} / {m}");
        }
    }
}
