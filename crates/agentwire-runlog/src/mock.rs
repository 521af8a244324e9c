//! Mock runs: fully valid, deterministic event streams for demos, documentation and tests,
//! from options ([`create_mock_run`]) or by scenario name ([`get_scenario`]).

use serde_json::{Map, Value, json};

use crate::event::{RunEvent, SCHEMA_VERSION};

/// Most steps a mock run has; larger requests are clamped.
pub const MAX_MOCK_STEPS: usize = 100_000;

/// Time between two mock events, in milliseconds.
const MOCK_EVENT_INTERVAL_MS: u64 = 150;

/// How the approval of a mock run ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ApprovalOutcome {
    /// Approved as proposed.
    #[default]
    Approve,
    /// Approved with edits.
    Edit,
    /// Rejected: the step fails and the run stops with an error.
    Reject,
    /// No decision yet: the stream stops at `run:paused` (reason `approval`).
    Pending,
}

impl ApprovalOutcome {
    /// Parses `approve`, `edit`, `reject` or `pending`.
    pub fn from_name(name: &str) -> Option<ApprovalOutcome> {
        match name {
            "approve" => Some(ApprovalOutcome::Approve),
            "edit" => Some(ApprovalOutcome::Edit),
            "reject" => Some(ApprovalOutcome::Reject),
            "pending" => Some(ApprovalOutcome::Pending),
            _ => None,
        }
    }
}

/// What a mock run contains.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MockRunOptions {
    /// Run id.
    pub run_id: String,
    /// Goal of the run.
    pub goal: String,
    /// Number of steps (at least 1, at most [`MAX_MOCK_STEPS`]).
    pub step_count: usize,
    /// The last step asks for an approval before its tool call.
    pub with_approval: bool,
    /// How that approval ends.
    pub approval_outcome: ApprovalOutcome,
    /// The first step fails once with a retryable error, then is retried and succeeds.
    pub with_failure: bool,
    /// An event of an unknown type appears in the first step (forward-compatibility folding).
    pub with_unknown_event: bool,
    /// `at` of the first event.
    pub start_at: u64,
}

impl Default for MockRunOptions {
    fn default() -> Self {
        MockRunOptions {
            run_id: "run_mock".into(),
            goal: "Send an activation email to 20 inactive users".into(),
            step_count: 3,
            with_approval: false,
            approval_outcome: ApprovalOutcome::Approve,
            with_failure: false,
            with_unknown_event: false,
            start_at: 1_735_689_600_000,
        }
    }
}

const STEP_TITLES: &[&str] = &[
    "Query inactive users",
    "Draft the email",
    "Review the draft",
    "Send the emails",
];
const TOOLS: &[&str] = &["db.query", "llm.generate", "docs.review", "mail.send"];

/// One event with a full envelope; `payload` must be an object (anything else gives an empty
/// payload).
pub fn create_mock_event(
    run_id: &str,
    seq: u64,
    at: u64,
    event_type: &str,
    payload: Value,
) -> RunEvent {
    let payload = match payload {
        Value::Object(map) => map,
        _ => Map::new(),
    };
    RunEvent {
        id: format!("e_{seq}"),
        run_id: run_id.to_owned(),
        seq,
        at,
        schema_version: SCHEMA_VERSION,
        event_type: event_type.to_owned(),
        payload,
    }
}

/// The events of the default mock run.
pub fn create_mock_events() -> Vec<RunEvent> {
    create_mock_run(&MockRunOptions::default())
}

struct Builder<'o> {
    options: &'o MockRunOptions,
    events: Vec<RunEvent>,
}

impl Builder<'_> {
    fn push(&mut self, event_type: &str, payload: Value) -> String {
        let seq = self.events.len() as u64 + 1;
        let at = self.options.start_at + (seq - 1) * MOCK_EVENT_INTERVAL_MS;
        let event = create_mock_event(&self.options.run_id, seq, at, event_type, payload);
        let id = event.id.clone();
        self.events.push(event);
        id
    }
}

fn step_title(i: usize) -> String {
    let base = STEP_TITLES[i % STEP_TITLES.len()];
    if i < STEP_TITLES.len() {
        base.to_owned()
    } else {
        format!("{base} ({})", i + 1)
    }
}

/// A fully valid run built from `options`. Deterministic: the same options give the same events.
pub fn create_mock_run(options: &MockRunOptions) -> Vec<RunEvent> {
    let steps = options.step_count.clamp(1, MAX_MOCK_STEPS);
    let mut b = Builder {
        options,
        events: Vec::with_capacity(steps * 6 + 4),
    };
    b.push(
        "run:start",
        json!({"goal": options.goal, "agent": "mock-agent"}),
    );
    let plan: Vec<Value> = (0..steps)
        .map(|i| json!({"id": format!("step_{}", i + 1), "title": step_title(i)}))
        .collect();
    b.push("plan", json!({"steps": plan}));
    for i in 0..steps {
        let step_id = format!("step_{}", i + 1);
        let tool = TOOLS[i % TOOLS.len()];
        let start_id = b.push(
            "step:start",
            json!({"stepId": step_id, "title": step_title(i)}),
        );
        if options.with_unknown_event && i == 0 {
            b.push(
                "agent:thought",
                json!({"stepId": step_id, "text": "Users without a login in 30 days count as inactive."}),
            );
        }
        if options.with_failure && i == 0 {
            let call_id = format!("call_{}_1", i + 1);
            b.push(
                "tool:call",
                json!({"stepId": step_id, "callId": call_id, "name": tool, "args": {"table": "users", "limit": 20}}),
            );
            b.push(
                "tool:result",
                json!({"callId": call_id, "stepId": step_id, "ok": false,
                       "error": {"message": "connection timed out after 30 s", "code": "ETIMEDOUT"}, "ms": 30000}),
            );
            b.push(
                "step:error",
                json!({"stepId": step_id, "error": {"message": "connection timed out after 30 s", "code": "ETIMEDOUT"}, "retryable": true}),
            );
            b.push(
                "retry:request",
                json!({"stepId": step_id, "fromEventId": start_id, "reason": "retryable failure", "attempt": 2}),
            );
            b.push(
                "step:start",
                json!({"stepId": step_id, "title": step_title(i)}),
            );
        }
        let call_id = format!("call_{}", i + 1);
        let args = json!({"step": i + 1, "goal": options.goal});
        if options.with_approval && i + 1 == steps {
            b.push(
                "approval:request",
                json!({"stepId": step_id, "approvalId": "approval_1", "callId": call_id,
                       "summary": format!("Allow {tool} for: {}", options.goal), "risk": "high",
                       "preview": {"tool": tool, "args": args}}),
            );
            match options.approval_outcome {
                ApprovalOutcome::Pending => {
                    b.push(
                        "run:paused",
                        json!({"reason": "approval", "message": "waiting for a reviewer"}),
                    );
                    return b.events;
                }
                ApprovalOutcome::Approve => {
                    b.push(
                        "approval:decision",
                        json!({"approvalId": "approval_1", "decision": "approve", "by": "reviewer"}),
                    );
                }
                ApprovalOutcome::Edit => {
                    b.push(
                        "approval:decision",
                        json!({"approvalId": "approval_1", "decision": "edit", "by": "reviewer",
                               "comment": "send to 10 users first", "edited": {"step": i + 1, "limit": 10}}),
                    );
                }
                ApprovalOutcome::Reject => {
                    b.push(
                        "approval:decision",
                        json!({"approvalId": "approval_1", "decision": "reject", "by": "reviewer",
                               "comment": "not this week"}),
                    );
                    b.push(
                        "step:error",
                        json!({"stepId": step_id, "error": "approval rejected", "retryable": false}),
                    );
                    b.push(
                        "run:error",
                        json!({"error": "approval rejected", "stepId": step_id}),
                    );
                    return b.events;
                }
            }
        }
        b.push(
            "tool:call",
            json!({"stepId": step_id, "callId": call_id, "name": tool, "args": args}),
        );
        b.push(
            "step:progress",
            json!({"stepId": step_id, "progress": 0.5, "message": "half way"}),
        );
        b.push(
            "tool:result",
            json!({"callId": call_id, "stepId": step_id, "ok": true, "result": {"rows": 20},
                   "ms": 40 + i as u64, "tokens": 120, "cost": 0.0012}),
        );
        b.push("step:done", json!({"stepId": step_id}));
    }
    b.push(
        "run:done",
        json!({"summary": format!("{steps} steps done")}),
    );
    b.events
}

/// A named mock run.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Scenario {
    /// Name, kebab-case.
    pub name: &'static str,
    /// What it shows.
    pub description: &'static str,
    /// The options it is built from.
    pub options: MockRunOptions,
}

/// Every named scenario.
pub fn scenarios() -> Vec<Scenario> {
    let base = MockRunOptions::default;
    let approval = |outcome| MockRunOptions {
        with_approval: true,
        approval_outcome: outcome,
        ..MockRunOptions::default()
    };
    vec![
        Scenario {
            name: "happy-path",
            description: "three steps, every tool call succeeds",
            options: base(),
        },
        Scenario {
            name: "approval-approved",
            description: "the last step waits for an approval that is granted",
            options: approval(ApprovalOutcome::Approve),
        },
        Scenario {
            name: "approval-edited",
            description: "the approval is granted with edits",
            options: approval(ApprovalOutcome::Edit),
        },
        Scenario {
            name: "approval-rejected",
            description: "the approval is rejected and the run stops with an error",
            options: approval(ApprovalOutcome::Reject),
        },
        Scenario {
            name: "approval-pending",
            description: "the stream stops while an approval waits (a run in progress)",
            options: approval(ApprovalOutcome::Pending),
        },
        Scenario {
            name: "retry-after-failure",
            description: "the first step fails with a retryable error and succeeds on retry",
            options: MockRunOptions {
                with_failure: true,
                ..base()
            },
        },
        Scenario {
            name: "unknown-event",
            description: "an event of an unknown type is folded (forward compatibility)",
            options: MockRunOptions {
                with_unknown_event: true,
                ..base()
            },
        },
        Scenario {
            name: "everything",
            description: "failure and retry, an unknown event, and a pending approval, in four steps",
            options: MockRunOptions {
                step_count: 4,
                with_failure: true,
                with_unknown_event: true,
                ..approval(ApprovalOutcome::Pending)
            },
        },
    ]
}

/// The events of a named scenario.
pub fn get_scenario(name: &str) -> Option<Vec<RunEvent>> {
    scenarios()
        .into_iter()
        .find(|s| s.name == name)
        .map(|s| create_mock_run(&s.options))
}
