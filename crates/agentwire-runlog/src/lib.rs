//! TaskLens run events: the append-only stream of an agent run (run, plan, step, tool, approval,
//! retry) from which every view of the run is derived.
//!
//! - [`validate_event`], [`split_events`]: strict validation that never panics or drops input.
//! - [`to_run_events`]: lenient coercion of hand-written logs, with every change reported;
//!   [`LiveCoercer`]: the same for a stream read as it arrives.
//! - [`normalize`] and the stream helpers: sort by `seq`, dedupe by `id`, slice.
//! - [`derive_run_state`], [`Deriver`]: the run state, in full or incrementally.
//! - [`create_mock_run`], [`scenarios`]: valid streams for demos and tests.
//!
//! The shapes come from one schema document, [`SCHEMA_TEXT`]
//! (`protocols/tasklens/run-events.schema.json`). The crate does no I/O.

pub mod coerce;
pub mod event;
mod line;
pub mod mock;
pub mod opaque;
pub mod state;
pub mod stream;
pub mod validate;
pub mod view;

pub use coerce::{
    ByLine, LineItem, LinePlan, LineSource, LiveCoercer, MetaCount, STREAM_PIECE_BYTES,
    StreamedState, plan_by_line, plan_by_line_from,
};
pub use coerce::{
    CoerceMeta, CoerceOptions, CoerceResult, DEFAULT_RUN_ID, InputShape, Issue, IssueLevel,
    MALFORMED_EVENT_TYPE, MalformedLine, PIPELINE_MIN_BYTES, coerce_and_derive_ndjson,
    derive_run_state_from_slice, is_coerce_result, stream_coerce_and_derive, to_run_events,
    to_run_events_from_slice,
};
pub use event::{
    APPROVAL_EVENT_TYPES, Decision, ENVELOPE_FIELDS, EventKind, MAX_SAFE_INTEGER, PauseReason,
    RISK_WEIGHT, RUN_EVENT_TYPES, Risk, RunEvent, SCHEMA_VERSION, event_from_object,
    is_known_event_type, parse_event_fast,
};
pub use mock::{
    ApprovalOutcome, MockRunOptions, Scenario, create_mock_event, create_mock_events,
    create_mock_run, get_scenario, scenarios,
};
pub use opaque::Json;
pub use state::{
    Applied, ApprovalState, ApprovalStatus, Deriver, ErrorEntry, ErrorSource, PlanStep, RetryState,
    RunState, RunStatus, StepState, StepStatus, ToolCallState, ToolCallStatus, Totals,
    UnknownEvent, derive_run_state, derive_run_state_from_unknown, derive_run_state_owned,
    has_pending_approval,
};
pub use stream::{
    append_event, append_events, compare_by_seq, dedupe_by_id, filter_by_run, latest_seq,
    normalize, normalize_in_place, since_seq, sort_by_seq, up_to_event_id,
};
pub use validate::{
    InvalidEvent, Split, ValidationIssue, assert_event, is_envelope, is_valid_event,
    is_valid_run_event, payload_fields_valid, split_events, validate_envelope, validate_event,
    validate_payload, validate_payload_fields,
};
pub use view::{
    IssueGroup, IssueGroups, IssueList, MAX_GROUP_RANGES, TextOptions, group_issues, render_html,
    render_text, summary_line, terminal_safe, write_issue_summary, write_issues, write_text,
    write_text_by_line,
};

/// The canonical schema document of run events (canonical text).
pub const SCHEMA_TEXT: &str = include_str!("../../../protocols/tasklens/run-events.schema.json");
