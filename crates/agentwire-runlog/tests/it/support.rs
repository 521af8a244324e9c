//! What the test modules share: the reference derivations every faster path is compared with,
//! and the example log.

use agentwire_runlog::{
    CoerceOptions, RunState, StreamedState, derive_run_state_owned, plan_by_line,
    to_run_events_from_slice,
};

/// The state of the full coercer's valid events, in output order (not normalized).
pub(crate) fn full_state(bytes: &[u8], options: &CoerceOptions) -> RunState {
    derive_run_state_owned(to_run_events_from_slice(bytes, options).into_events())
}

/// What `runlog state` derives: the normalized events of the full coercer.
pub(crate) fn normalized_state(bytes: &[u8], options: &CoerceOptions) -> RunState {
    to_run_events_from_slice(bytes, options).into_state()
}

/// The state of the coerced events in output order by the cheapest path that takes the log:
/// the streamed fold, else the line-by-line plan, else the full coercer. Each path must give
/// [`full_state`].
pub(crate) fn coerce_and_derive(bytes: &[u8], options: &CoerceOptions) -> RunState {
    if let Some(state) = StreamedState::derive(bytes, options) {
        return state;
    }
    match plan_by_line(bytes, options) {
        Some(plan) => plan.derive(),
        None => full_state(bytes, options),
    }
}

/// The example log of the repository (`examples/deploy-run.ndjson`).
pub(crate) fn example_log() -> Vec<u8> {
    let path = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../examples/deploy-run.ndjson"
    );
    let bytes = std::fs::read(path).unwrap_or_default();
    assert!(!bytes.is_empty(), "{path} is readable");
    bytes
}
