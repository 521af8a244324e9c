//! Run-log throughput: coerce + derive of 1,000,000 NDJSON events (~300 B each), derivation from
//! parsed events, and the incremental deriver's per-event cost at 1k and 1M events.
//!
//! `cargo bench -p agentwire-runlog --bench runlog` runs the full measurement; under `cargo test`
//! (no `--bench` argument) it runs a 10,000-event smoke pass so the code stays exercised.

use std::hint::black_box;
use std::time::{Duration, Instant};

use agentwire_runlog::{
    CoerceOptions, Deriver, RunEvent, create_mock_event, derive_run_state, to_run_events_from_slice,
};
use serde_json::json;

/// Events in the full measurement.
const FULL_EVENTS: usize = 1_000_000;
/// Events in the smoke pass run by `cargo test`.
const SMOKE_EVENTS: usize = 10_000;
/// Steps of the generated run; events cycle through them so the run state stays bounded.
const STEPS: usize = 50;

/// A long run: per cycle step:start, tool:call, step:progress, tool:result, step:done, with
/// payload text sized so the average line is about 300 bytes.
fn generate(n: usize) -> Vec<RunEvent> {
    let mut events = Vec::with_capacity(n);
    let mut seq = 0u64;
    let mut push = |events: &mut Vec<RunEvent>, ty: &str, payload: serde_json::Value| {
        seq += 1;
        events.push(create_mock_event(
            "run_bench",
            seq,
            1_735_689_600_000 + seq * 7,
            ty,
            payload,
        ));
    };
    push(
        &mut events,
        "run:start",
        json!({"goal": "benchmark a long run", "agent": "bench"}),
    );
    let plan: Vec<_> = (0..STEPS)
        .map(|i| json!({"id": format!("step_{i}"), "title": format!("Step {i}")}))
        .collect();
    push(&mut events, "plan", json!({"steps": plan}));
    let mut cycle = 0usize;
    while events.len() < n {
        let step = format!("step_{}", cycle % STEPS);
        let call = format!("call_{cycle}");
        let kinds: [(&str, serde_json::Value); 5] = [
            (
                "step:start",
                json!({"stepId": step, "title": "Query the users table for accounts without a login"}),
            ),
            (
                "tool:call",
                json!({"stepId": step, "callId": call, "name": "db.query",
                "args": {"table": "users", "where": "last_login < now() - interval '30 days'", "limit": 20, "cycle": cycle}}),
            ),
            (
                "step:progress",
                json!({"stepId": step, "progress": 0.5, "message": "query sent to the primary database, waiting for rows"}),
            ),
            (
                "tool:result",
                json!({"callId": call, "stepId": step, "ok": true,
                "result": {"rows": 20, "ids": [101, 102, 103, 104, 105, 106, 107, 108]}, "ms": 41, "tokens": 120, "cost": 0.0012}),
            ),
            (
                "step:done",
                json!({"stepId": step, "output": {"rows": 20, "note": "inactive users found"}}),
            ),
        ];
        for (ty, payload) in kinds {
            if events.len() == n {
                break;
            }
            push(&mut events, ty, payload);
        }
        cycle += 1;
    }
    events
}

fn ndjson(events: &[RunEvent]) -> Vec<u8> {
    let mut out = Vec::with_capacity(events.len() * 320);
    for e in events {
        serde_json::to_writer(&mut out, e).unwrap_or_default();
        out.push(b'\n');
    }
    out
}

/// Resident set size and its peak, in bytes (Linux `/proc/self/status`).
fn memory() -> (u64, u64) {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    let field = |name: &str| {
        status
            .lines()
            .find(|l| l.starts_with(name))
            .and_then(|l| l.split_whitespace().nth(1))
            .and_then(|v| v.parse::<u64>().ok())
            .map_or(0, |kb| kb * 1024)
    };
    (field("VmRSS:"), field("VmHWM:"))
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

fn best_of<T>(runs: usize, mut f: impl FnMut() -> T) -> (Duration, T) {
    let mut best = Duration::MAX;
    let mut last = None;
    for _ in 0..runs {
        let start = Instant::now();
        let out = f();
        best = best.min(start.elapsed());
        last = Some(out);
    }
    match last {
        Some(out) => (best, out),
        None => (best, f()),
    }
}

fn per_event_ns(events: &[RunEvent], window: usize) -> f64 {
    // Cost of the last `window` pushes, after the first len - window.
    let mut deriver = Deriver::new();
    let split = events.len() - window;
    deriver.push_all(&events[..split]);
    let start = Instant::now();
    deriver.push_all(&events[split..]);
    let elapsed = start.elapsed();
    black_box(deriver.state().event_count);
    elapsed.as_nanos() as f64 / window as f64
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { FULL_EVENTS } else { SMOKE_EVENTS };
    let runs = if full { 3 } else { 1 };

    let events = generate(n);
    let text = ndjson(&events);
    let bytes = text.len() as u64;
    println!(
        "run-log benchmark: {n} events, {:.1} MB of NDJSON ({:.0} B/event)",
        mb(bytes),
        bytes as f64 / n as f64
    );

    // Derivation from parsed events.
    let (t, state) = best_of(runs, || derive_run_state(black_box(&events)));
    assert_eq!(state.event_count as usize, n);
    println!(
        "derive (parsed events)      {:>8.3} s  {:>6.2} M events/s",
        t.as_secs_f64(),
        n as f64 / t.as_secs_f64() / 1e6
    );
    drop(state);
    drop(events);

    // End to end: NDJSON bytes -> coerce -> derive.
    let (rss_before, _) = memory();
    let (t, (valid, state)) = best_of(runs, || {
        let result = to_run_events_from_slice(black_box(&text), &CoerceOptions::default());
        let state = derive_run_state(result.events());
        (result.meta.events, state)
    });
    let (_, peak) = memory();
    assert_eq!(valid, n);
    println!(
        "coerce + derive (NDJSON)    {:>8.3} s  {:>6.2} M events/s  {:>7.1} MB/s",
        t.as_secs_f64(),
        n as f64 / t.as_secs_f64() / 1e6,
        mb(bytes) / t.as_secs_f64()
    );
    println!(
        "memory: input {:.1} MB, RSS before {:.1} MB, peak {:.1} MB (peak above input: {:.2}x input)",
        mb(bytes),
        mb(rss_before),
        mb(peak),
        (peak.saturating_sub(rss_before)) as f64 / bytes as f64
    );
    println!(
        "run state: {} steps, {} tool calls, {} errors",
        state.steps.len(),
        state.tool_calls.len(),
        state.errors.len()
    );
    drop(state);

    // Incremental deriver: per-event cost near the start and after a long stream.
    let events = generate(n);
    let window = 1_000.min(n);
    let min_of = |f: &dyn Fn() -> f64| (0..5).map(|_| f()).fold(f64::MAX, f64::min);
    let early = min_of(&|| per_event_ns(&events[..window], window));
    let late = min_of(&|| per_event_ns(&events, window));
    println!(
        "incremental deriver: {early:.0} ns/event for a {window}-event stream, {late:.0} ns/event for the last {window} events of {n} (ratio {:.2})",
        late / early
    );
}
