//! The protocol's hand-written example, coerced: the exact expected output is the snapshot
//! (also written out in docs/runlog.md).
#![allow(clippy::expect_used)] // In test helpers, a panic is the failure report.

use agentwire_runlog::{CoerceOptions, IssueLevel, derive_run_state, to_run_events};
use serde_json::json;

fn handwritten() -> serde_json::Value {
    json!([
        { "type": "run:start", "goal": "给 20 位未激活用户发激活邮件" },
        { "type": "plan", "steps": ["查询未激活用户", "生成邮件草稿", "发送"] },
        { "type": "step:start", "stepId": "step_1" },
        { "type": "tool:call", "stepId": "step_1", "name": "db.query", "args": { "table": "users" } },
        { "type": "tool:result", "ok": true, "result": { "rows": 20 }, "ms": 41 },
        { "type": "step:done", "stepId": "step_1" },
    ])
}

#[test]
fn seed_example_coerces_to_the_documented_output() {
    let result = to_run_events(handwritten(), &CoerceOptions::default());
    insta::assert_json_snapshot!("seed_example", result);
}

#[test]
fn seed_example_is_fully_repaired() {
    let result = to_run_events(handwritten(), &CoerceOptions::default());
    assert_eq!(result.events().count(), 6);
    assert!(result.malformed.is_empty());
    assert_eq!(result.issues_at(IssueLevel::Degraded).count(), 0);
    assert_eq!(result.issues_at(IssueLevel::Dropped).count(), 0);
    assert_eq!(
        result.meta.goal.as_deref(),
        Some("给 20 位未激活用户发激活邮件")
    );
    let state = derive_run_state(result.events());
    insta::assert_json_snapshot!("seed_example_state", state);
}
