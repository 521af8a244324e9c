//! The lenient run-log coercer on any bytes: it never panics, the line-by-line coercer gives
//! the full coercer's result whenever it takes a log, and the state of `runlog state` is the
//! normalized derivation of the coerced events.
#![no_main]

use agentwire_runlog::{
    CoerceOptions, derive_run_state_from_slice, derive_run_state_owned, normalize_in_place,
    plan_by_line, to_run_events_from_slice,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let options = CoerceOptions::default();
    let result = to_run_events_from_slice(data, &options);
    // Every wrapper and event the coercer hands on is valid.
    for event in result.events() {
        assert!(agentwire_runlog::is_valid_run_event(event), "{event:?}");
    }
    if let Some(plan) = plan_by_line(data, &options) {
        assert_eq!(plan.collect(), result, "line by line differs");
    }
    let mut events = result.into_events();
    normalize_in_place(&mut events);
    assert_eq!(
        derive_run_state_from_slice(data, &options),
        derive_run_state_owned(events)
    );
});
