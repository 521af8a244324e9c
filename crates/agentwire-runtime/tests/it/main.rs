//! The runtime's tests, one binary: the core without I/O, the running core over a real SQLite
//! log, and attachments.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic)]

mod attachments;
mod core;
mod decisions;
mod human_tasks;
mod pipeline;
mod running;
mod subscriptions;

/// The approval the tests' agents ask: `shell` running `ls`.
fn shell_approval() -> agentwire_runtime::InteractionKind {
    agentwire_runtime::InteractionKind::Approval {
        approval_id: "approval-1".into(),
        agent_name: "test".into(),
        tool_name: "shell".into(),
        preview: serde_json::json!({"command": "ls"}),
        reason: None,
    }
}
