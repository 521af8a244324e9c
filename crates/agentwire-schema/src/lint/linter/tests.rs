//! Unit tests of the linter's helpers: the JSON equality key of enum values and counts.

use serde_json::json;

use super::count;
use super::values::equality_key;

#[test]
fn equality_key_is_json_equality() {
    assert_eq!(equality_key(&json!(1)), equality_key(&json!(1.0)));
    assert_eq!(
        equality_key(&json!({"a": 1, "b": [2]})),
        equality_key(&json!({"b": [2.0], "a": 1}))
    );
    assert_ne!(equality_key(&json!(true)), equality_key(&json!(1)));
    assert_ne!(equality_key(&json!("1")), equality_key(&json!(1)));
    assert_ne!(equality_key(&json!(0.5)), equality_key(&json!(0.25)));
}

#[test]
fn counts_accept_integral_floats_only() {
    assert_eq!(count(&json!(3)), Some(3));
    assert_eq!(count(&json!(3.0)), Some(3));
    assert_eq!(count(&json!(3.5)), None);
    assert_eq!(count(&json!(-1)), None);
    assert_eq!(count(&json!("3")), None);
}
