//! TaskLens run events: the append-only stream of an agent run (run, plan, step, tool, approval,
//! retry) from which every view of the run is derived.
//!
//! - [`validate_event`] and [`is_valid_event`] (every issue, the verdict), `RunEvent::try_from`
//!   (the typed event or every reason it is not one), [`split_events`]: strict validation that
//!   never panics or drops input.
//! - [`to_run_events`], [`to_run_events_from_slice`]: lenient coercion of hand-written logs, with
//!   every change reported; [`plan_by_line`]: the same a line at a time; [`LiveCoercer`]: the
//!   same for a stream read as it arrives.
//! - [`normalize`] and the stream helpers: sort by `seq`, dedupe by `id`, slice.
//! - [`derive_run_state`], [`Deriver`]: the run state of valid events, in full or
//!   incrementally; [`CoerceResult::state`] and [`derive_run_state_from_slice`]: the run state of
//!   coerced input (text streamed line by line when it allows it, [`StreamedState`]).
//! - [`create_mock_run`], [`scenarios`]: valid streams for demos and tests.
//!
//! The shapes come from one schema document, [`SCHEMA_TEXT`]
//! (`protocols/tasklens/run-events.schema.json`). The crate does no I/O.

pub mod coerce;
pub mod event;
mod line;
pub mod mock;
pub mod opaque;
mod pipeline;
pub mod state;
pub mod stream;
pub mod validate;
pub mod view;

pub use coerce::{
    ByLine, CoerceMeta, CoerceOptions, CoerceResult, DEFAULT_RUN_ID, InputShape, Issue, IssueLevel,
    LineItem, LinePlan, LineSource, LiveCoercer, MALFORMED_EVENT_TYPE, MalformedLine, MetaCount,
    is_coerce_result, plan_by_line, plan_by_line_from, to_run_events, to_run_events_from_slice,
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
pub use pipeline::{
    PIPELINE_MIN_BYTES, STREAM_PIECE_BYTES, StreamedState, derive_run_state_from_slice,
};
pub use state::{
    Applied, ApprovalState, ApprovalStatus, Deriver, ErrorEntry, ErrorSource, PlanStep, RetryState,
    RunState, RunStatus, StepState, StepStatus, ToolCallState, ToolCallStatus, Totals,
    UnknownEvent, derive_run_state, derive_run_state_owned, has_pending_approval,
};
pub use stream::{
    append_event, append_events, compare_by_seq, dedupe_by_id, filter_by_run, latest_seq,
    normalize, normalize_in_place, since_seq, sort_by_seq, up_to_event_id,
};
pub use validate::{
    InvalidEvent, Split, ValidationIssue, is_valid_event, is_valid_run_event, split_events,
    validate_event,
};
pub use view::{
    IssueGroup, IssueGroups, IssueList, MAX_GROUP_RANGES, TextOptions, WrittenPage, group_issues,
    render_html, render_text, summary_line, terminal_safe, write_html, write_html_by_line,
    write_issue_summary, write_issues, write_text, write_text_by_line,
};

/// The canonical schema document of run events (canonical text).
pub const SCHEMA_TEXT: &str = include_str!("../../../protocols/tasklens/run-events.schema.json");
