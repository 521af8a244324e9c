//! User-input forms and results, and the approval display helpers.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use agentwire_roll::approval::{
    ApprovalDecision, FileChangeKind, PendingApproval, explanation_of_preview,
    get_approval_diff_preview, get_approval_explanation, get_file_change_display,
};
use agentwire_roll::user_input::{
    Control, UserInputError, UserInputResult, normalize_user_input_result,
    normalize_user_input_result_for_form, validate_form,
};
use serde_json::{Value, json};

fn form() -> Vec<Control> {
    serde_json::from_value(json!([
        {"type": "text", "id": "name", "label": "Name", "required": true, "minLength": 2, "maxLength": 5},
        {"type": "multiline", "id": "notes", "label": "Notes", "required": false},
        {"type": "number", "id": "count", "label": "Count", "required": false, "min": 1, "max": 10, "integer": true},
        {"type": "boolean", "id": "ok", "label": "OK", "required": true},
        {"type": "choice", "id": "one", "label": "One", "required": true, "multiple": false,
         "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]},
        {"type": "choice", "id": "many", "label": "Many", "required": false, "multiple": true, "minSelections": 2,
         "maxSelections": 3, "options": [{"id": "x", "label": "X"}, {"id": "y", "label": "Y"}, {"id": "z", "label": "Z"}, {"id": "w", "label": "W"}]}
    ]))
    .unwrap()
}

fn submitted(values: Value) -> UserInputResult {
    serde_json::from_value(json!({"status": "submitted", "values": values})).unwrap()
}

#[test]
fn a_valid_result_is_ordered_by_control_order() {
    let result = submitted(json!([
        {"id": "many", "value": ["z", "x"]},
        {"id": "one", "value": "b"},
        {"id": "ok", "value": false},
        {"id": "name", "value": "Ann"},
    ]));
    let normalized = normalize_user_input_result_for_form(&form(), result).unwrap();
    assert_eq!(
        serde_json::to_value(normalized).unwrap(),
        json!({"status": "submitted", "values": [
            {"id": "name", "value": "Ann"}, {"id": "ok", "value": false}, {"id": "one", "value": "b"}, {"id": "many", "value": ["z", "x"]}
        ]})
    );
}

#[test]
fn cancelled_is_a_normal_result() {
    let cancelled: UserInputResult =
        serde_json::from_value(json!({"status": "cancelled", "reason": "closed"})).unwrap();
    assert_eq!(
        normalize_user_input_result_for_form(&form(), cancelled.clone()),
        Ok(cancelled)
    );
    let long: UserInputResult =
        serde_json::from_value(json!({"status": "cancelled", "reason": "r".repeat(501)})).unwrap();
    assert!(matches!(
        normalize_user_input_result(long),
        Err(UserInputError::Malformed(_))
    ));
}

#[test]
fn every_mismatch_is_refused() {
    let base = |extra: Value| {
        let mut values = vec![
            json!({"id": "name", "value": "Ann"}),
            json!({"id": "ok", "value": true}),
            json!({"id": "one", "value": "a"}),
        ];
        values.retain(|v| v["id"] != extra["id"]);
        values.push(extra);
        submitted(Value::Array(values))
    };
    let cases: Vec<(UserInputResult, UserInputError)> = vec![
        (
            base(json!({"id": "ghost", "value": "x"})),
            UserInputError::UnknownControl("ghost".into()),
        ),
        (
            submitted(json!([{"id": "name", "value": "Ann"}, {"id": "name", "value": "Bob"}])),
            UserInputError::DuplicateValue("name".into()),
        ),
        (
            submitted(json!([{"id": "ok", "value": true}, {"id": "one", "value": "a"}])),
            UserInputError::MissingRequired("name".into()),
        ),
        (
            base(json!({"id": "name", "value": "A"})),
            UserInputError::OutOfBounds("name".into()),
        ),
        (
            base(json!({"id": "name", "value": "Annabel"})),
            UserInputError::OutOfBounds("name".into()),
        ),
        (
            base(json!({"id": "name", "value": 5})),
            UserInputError::WrongType("name".into()),
        ),
        (
            base(json!({"id": "count", "value": 2.5})),
            UserInputError::OutOfBounds("count".into()),
        ),
        (
            base(json!({"id": "count", "value": 11})),
            UserInputError::OutOfBounds("count".into()),
        ),
        (
            base(json!({"id": "count", "value": "3"})),
            UserInputError::WrongType("count".into()),
        ),
        (
            base(json!({"id": "ok", "value": "yes"})),
            UserInputError::WrongType("ok".into()),
        ),
        (
            base(json!({"id": "one", "value": "c"})),
            UserInputError::BadOption("one".into()),
        ),
        (
            base(json!({"id": "one", "value": ["a"]})),
            UserInputError::WrongType("one".into()),
        ),
        (
            base(json!({"id": "many", "value": ["x"]})),
            UserInputError::OutOfBounds("many".into()),
        ),
        (
            base(json!({"id": "many", "value": ["x", "y", "z", "w"]})),
            UserInputError::OutOfBounds("many".into()),
        ),
        (
            base(json!({"id": "many", "value": ["x", "x"]})),
            UserInputError::BadOption("many".into()),
        ),
        (
            base(json!({"id": "many", "value": ["x", "q"]})),
            UserInputError::BadOption("many".into()),
        ),
        (
            base(json!({"id": "notes", "value": {"secret": 1}})),
            UserInputError::WrongType("notes".into()),
        ),
    ];
    for (result, expected) in cases {
        assert_eq!(
            normalize_user_input_result_for_form(&form(), result.clone()),
            Err(expected),
            "{result:?}"
        );
    }
}

#[test]
fn text_bounds_at_and_past_the_limit() {
    let controls: Vec<Control> = serde_json::from_value(
        json!([{"type": "text", "id": "t", "label": "T", "required": false}]),
    )
    .unwrap();
    let at = submitted(json!([{"id": "t", "value": "x".repeat(10_000)}]));
    assert!(normalize_user_input_result_for_form(&controls, at).is_ok());
    let past = submitted(json!([{"id": "t", "value": "x".repeat(10_001)}]));
    assert!(normalize_user_input_result_for_form(&controls, past).is_err());
    // Emoji count as two UTF-16 units, as in JavaScript.
    let emoji = submitted(json!([{"id": "t", "value": "😀".repeat(5_001)}]));
    assert!(normalize_user_input_result_for_form(&controls, emoji).is_err());
}

#[test]
fn form_rules_beyond_the_schema() {
    let check =
        |controls: Value| validate_form(&serde_json::from_value::<Vec<Control>>(controls).unwrap());
    assert_eq!(check(json!([])), Err(UserInputError::ControlCount(0)));
    let seventeen: Vec<Value> = (0..17)
        .map(|i| json!({"type": "boolean", "id": format!("b{i}"), "label": "B", "required": false}))
        .collect();
    assert_eq!(check(Value::Array(seventeen[..16].to_vec())), Ok(()));
    assert_eq!(
        check(Value::Array(seventeen)),
        Err(UserInputError::ControlCount(17))
    );
    assert_eq!(
        check(
            json!([{"type": "boolean", "id": "a", "label": "A", "required": false}, {"type": "boolean", "id": "a", "label": "B", "required": false}])
        ),
        Err(UserInputError::DuplicateId("a".into()))
    );
    assert!(matches!(
        check(json!([{"type": "boolean", "id": "   ", "label": "A", "required": false}])),
        Err(UserInputError::BadText { .. })
    ));
    assert_eq!(
        check(json!([{"type": "text", "id": "t", "label": "T", "required": true, "maxLength": 0}])),
        Err(UserInputError::InconsistentBounds("t".into()))
    );
    assert_eq!(
        check(
            json!([{"type": "number", "id": "n", "label": "N", "required": true, "min": 0.2, "max": 0.8, "integer": true}])
        ),
        Err(UserInputError::InconsistentBounds("n".into()))
    );
    assert_eq!(
        check(
            json!([{"type": "number", "id": "n", "label": "N", "required": true, "min": 3, "max": 1}])
        ),
        Err(UserInputError::InconsistentBounds("n".into()))
    );
    assert_eq!(
        check(
            json!([{"type": "choice", "id": "c", "label": "C", "required": true, "multiple": true, "minSelections": 3, "options": [{"id": "a", "label": "A"}, {"id": "b", "label": "B"}]}])
        ),
        Err(UserInputError::InconsistentBounds("c".into()))
    );
    assert_eq!(
        check(
            json!([{"type": "choice", "id": "c", "label": "C", "required": true, "multiple": false, "options": [{"id": "a", "label": "A"}, {"id": "a", "label": "B"}]}])
        ),
        Err(UserInputError::DuplicateId("a".into()))
    );
    // There is no secret kind at all.
    assert!(
        serde_json::from_value::<Control>(
            json!({"type": "password", "id": "p", "label": "P", "required": true})
        )
        .is_err()
    );
}

fn approval(preview: Value) -> PendingApproval {
    serde_json::from_value(json!({
        "id": "00000000-0000-4000-8000-000000000005", "turnId": "00000000-0000-4000-8000-000000000003",
        "agentName": "shell", "toolName": "run", "preview": preview
    }))
    .unwrap()
}

#[test]
fn explanation_is_trimmed_and_bounded() {
    assert_eq!(
        get_approval_explanation(&approval(json!({"explanation": "  lists files  "}))),
        Some("lists files".into())
    );
    assert_eq!(
        get_approval_explanation(&approval(json!({"explanation": "x".repeat(100)}))),
        Some("x".repeat(100))
    );
    assert_eq!(
        get_approval_explanation(&approval(json!({"explanation": "x".repeat(101)}))),
        None
    );
    assert_eq!(
        get_approval_explanation(&approval(json!({"explanation": "   "}))),
        None
    );
    assert_eq!(
        get_approval_explanation(&approval(json!({"explanation": 3}))),
        None
    );
    assert_eq!(
        get_approval_explanation(&approval(json!(["explanation"]))),
        None
    );
    assert_eq!(explanation_of_preview(&json!("explanation")), None);
}

#[test]
fn diff_preview_and_file_change_display() {
    let diff = json!({"path": "src/a.rs", "change": "modify", "added": 2, "removed": 1, "hunks": 1, "unified": "@@", "truncated": false, "extra": "ignored"});
    let parsed = get_approval_diff_preview(&approval(json!({"diff": diff}))).unwrap();
    assert_eq!(parsed.change, FileChangeKind::Modify);
    assert_eq!(parsed.unified.as_deref(), Some("@@"));
    let stats_only = json!({"path": "big.bin", "change": "create", "added": 0, "removed": 0, "hunks": 0, "truncated": true});
    assert!(
        get_approval_diff_preview(&approval(json!({"diff": stats_only})))
            .unwrap()
            .unified
            .is_none()
    );
    let bad = [
        json!({"path": "", "change": "modify", "added": 0, "removed": 0, "hunks": 0, "truncated": false}),
        json!({"path": "a", "change": "delete", "added": 0, "removed": 0, "hunks": 0, "truncated": false}),
        json!({"path": "a", "change": "modify", "added": -1, "removed": 0, "hunks": 0, "truncated": false}),
        json!({"path": "a", "change": "modify", "added": 0, "removed": 0, "hunks": 0}),
        json!({"path": "a", "change": "modify", "added": 0, "removed": 0, "hunks": 0, "unified": "x".repeat(20_001), "truncated": true}),
        json!({"path": "p".repeat(4_097), "change": "modify", "added": 0, "removed": 0, "hunks": 0, "truncated": false}),
    ];
    for diff in bad {
        assert_eq!(
            get_approval_diff_preview(&approval(json!({"diff": diff.clone()}))),
            None,
            "{diff}"
        );
    }
    let display = json!({"text": "Wrote src/a.rs", "diff": {"path": "src/a.rs", "change": "create", "added": 3, "removed": 0, "hunks": 1, "truncated": false}});
    assert_eq!(
        get_file_change_display(&display).unwrap().text,
        "Wrote src/a.rs"
    );
    assert_eq!(get_file_change_display(&json!("Wrote src/a.rs")), None);
    // An operation view's display is a ledger envelope: the helper reads its value.
    let ledger = json!({"version": 1, "encoding": "json", "value": display});
    assert_eq!(get_file_change_display(&ledger), None);
    assert!(get_file_change_display(&ledger["value"]).is_some());
}

#[test]
fn approval_decisions() {
    assert_eq!(
        serde_json::from_value::<ApprovalDecision>(json!({"decision": "approve"})).unwrap(),
        ApprovalDecision::Approve {}
    );
    assert!(
        serde_json::from_value::<ApprovalDecision>(json!({"decision": "approve", "reason": "x"}))
            .is_err()
    );
    assert!(serde_json::from_value::<ApprovalDecision>(json!({"decision": "defer"})).is_err());
}
