//! Run-log derivation and coercion, each against an anchor measured in the same run on the same
//! input, rounds alternating, medians of [`ROUNDS`], each ratio printed with its target and `met`
//! or `MISSED`:
//!
//! - derivation from parsed events (`derive_run_state`, which is `Deriver::push_all`, and
//!   `Deriver::push` one event at a time) against [`anchor_keys`]: the work no derivation can
//!   skip on the same `RunEvent`s (one set insert per event id, one map update per step key and
//!   per tool-call key the fold keys by); target >= 0.5x;
//! - coerce + derive of NDJSON bytes (`derive_run_state_from_slice`) against parsing every line
//!   into a `serde_json::Value` on one thread (less work: no checks, no state); target >= 1x.
//!
//! It also prints the streamed path's peak memory and the incremental deriver's per-event cost
//! along a long stream (no target: the anchor ratio above is taken on a 1,000,000-id set, which
//! leaves the caches for both sides alike).
//!
//! `cargo bench -p agentwire-runlog --bench runlog` (or `scripts/bench.sh --runlog`) runs the
//! full measurement on 1,000,000 events of about 230 B; under `cargo test --benches` (no `--bench`
//! argument) it runs a 10,000-event smoke pass so the code stays exercised.

use std::collections::{HashMap, HashSet};
use std::hint::black_box;
use std::time::Instant;

use agentwire_runlog::{
    CoerceOptions, Deriver, RunEvent, create_mock_event, derive_run_state,
    derive_run_state_from_slice, derive_run_state_owned, to_run_events_from_slice,
};
use serde_json::json;

/// The benchmark runs with mimalloc, as a host that cares about throughput would; glibc malloc
/// spends most of this workload in free-list consolidation.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

/// Events in the full measurement.
const FULL_EVENTS: usize = 1_000_000;
/// Events in the smoke pass run by `cargo test --benches`.
const SMOKE_EVENTS: usize = 10_000;
/// Steps of the generated run; events cycle through them so the run state stays bounded.
const STEPS: usize = 50;

/// A long run: per cycle step:start, tool:call, step:progress, tool:result, step:done, with
/// payload text sized so the average line is about 300 bytes.
fn generate_each(n: usize, mut out: impl FnMut(RunEvent)) {
    let mut count = 0usize;
    let mut seq = 0u64;
    let mut push = |count: &mut usize, ty: &str, payload: serde_json::Value| {
        seq += 1;
        *count += 1;
        out(create_mock_event(
            "run_bench",
            seq,
            1_735_689_600_000 + seq * 7,
            ty,
            payload,
        ));
    };
    push(
        &mut count,
        "run:start",
        json!({"goal": "benchmark a long run", "agent": "bench"}),
    );
    let plan: Vec<_> = (0..STEPS)
        .map(|i| json!({"id": format!("step_{i}"), "title": format!("Step {i}")}))
        .collect();
    push(&mut count, "plan", json!({"steps": plan}));
    let mut cycle = 0usize;
    while count < n {
        let step = format!("step_{}", cycle % STEPS);
        let call = format!("call_{cycle}");
        let kinds: [(&str, serde_json::Value); 5] = [
            (
                "step:start",
                json!({"stepId": step, "title": "Query the users table for accounts without a login in the last thirty days"}),
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
                json!({"stepId": step, "output": {"rows": 20, "note": "inactive users found, ready for the email draft"}}),
            ),
        ];
        for (ty, payload) in kinds {
            if count == n {
                break;
            }
            push(&mut count, ty, payload);
        }
        cycle += 1;
    }
}

fn generate(n: usize) -> Vec<RunEvent> {
    let mut events = Vec::with_capacity(n);
    generate_each(n, |e| events.push(e));
    events
}

/// The NDJSON text of the generated run, written event by event (the events are never all held).
fn ndjson(n: usize) -> Vec<u8> {
    let mut out = Vec::with_capacity(n * 240);
    generate_each(n, |e| {
        serde_json::to_writer(&mut out, &e).unwrap_or_default();
        out.push(b'\n');
    });
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

/// Peak memory of a phase against the input size. The peak is the process's high-water mark, so
/// it is the phase's own only when no earlier phase went higher.
fn report_memory(bytes: u64, rss_before: u64, peak: u64) {
    println!(
        "memory: input {:.1} MB, RSS before {:.1} MB, peak {:.1} MB (peak above RSS before: {:.1} MB, {:.2}x input)",
        mb(bytes),
        mb(rss_before),
        mb(peak),
        mb(peak.saturating_sub(rss_before)),
        (peak.saturating_sub(rss_before)) as f64 / bytes as f64
    );
}

fn mb(bytes: u64) -> f64 {
    bytes as f64 / 1e6
}

/// CPU time of the whole process (every thread), in nanoseconds, from `/proc/self/stat`
/// (`utime + stime`, in clock ticks of 10 ms). On a shared machine it is steadier than wall
/// time: other processes do not inflate it.
fn cpu_ns() -> u64 {
    const NS_PER_TICK: u64 = 10_000_000;
    let stat = std::fs::read_to_string("/proc/self/stat").unwrap_or_default();
    // Fields after the command name (which is in parentheses and may hold spaces).
    let rest = stat.rsplit_once(')').map_or("", |(_, r)| r);
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        fields
            .get(i)
            .and_then(|v| v.parse::<u64>().ok())
            .unwrap_or(0)
    };
    // utime and stime are fields 14 and 15 of the line, 12 and 13 after the name.
    (ticks(11) + ticks(12)) * NS_PER_TICK
}

/// Nanoseconds per push over a fresh stream of `window` events, best of `repeats` streams. Each
/// stream's deriver is kept until the end, so every stream grows into new memory as a long
/// stream does (a dropped deriver's memory, reused hot by the next one, would flatter it). The
/// events pushed are a copy made just before the timed window, here and in [`late_ns`], so both
/// read their input from equally warm memory and the ratio is the deriver's own.
fn early_ns(events: &[RunEvent], window: usize, repeats: usize, feed: Feed) -> f64 {
    let mut best = f64::MAX;
    let mut kept = Vec::with_capacity(repeats);
    for _ in 0..repeats {
        let mut deriver = Deriver::new();
        let input = events[..window].to_vec();
        let start = Instant::now();
        feed(&mut deriver, &input);
        let elapsed = start.elapsed();
        kept.push(deriver);
        best = best.min(elapsed.as_nanos() as f64 / window as f64);
    }
    black_box(kept.len());
    best
}

/// Nanoseconds per push after each of `checkpoints` events of one stream (increasing, at least
/// `LATE_WINDOWS * window` apart): the deriver is fed up to a checkpoint, then each of the
/// following `LATE_WINDOWS` windows of `window` new events is timed, and the best window counts
/// (one page fault or timer interrupt in a window of a few hundred microseconds would otherwise
/// dominate it). `events` holds the checkpoints' windows beyond the last checkpoint.
fn late_ns(events: &[RunEvent], checkpoints: &[usize], window: usize, feed: Feed) -> Vec<f64> {
    let mut deriver = Deriver::new();
    let mut at = 0;
    let mut curve = Vec::new();
    for &checkpoint in checkpoints {
        let checkpoint = checkpoint.max(at);
        deriver.push_all(&events[at..checkpoint]);
        let timed = &events[checkpoint..checkpoint + LATE_WINDOWS * window];
        let mut best = f64::MAX;
        for chunk in timed.chunks_exact(window) {
            let input = chunk.to_vec();
            let start = Instant::now();
            feed(&mut deriver, &input);
            let elapsed = start.elapsed();
            best = best.min(elapsed.as_nanos() as f64 / window as f64);
        }
        curve.push(best);
        at = checkpoint + timed.len();
    }
    black_box(deriver.state().event_count);
    curve
}

/// Line-by-line parsing into `serde_json::Value`, the anchor the end-to-end figures are compared
/// with in the same run (it does less than coercion: no checks, no state).
fn parse_lines(text: &[u8]) -> usize {
    text.split(|&b| b == b'\n')
        .filter(|l| !l.is_empty())
        .filter(|l| serde_json::from_slice::<serde_json::Value>(l).is_ok())
        .count()
}

/// Alternating rounds per figure; each figure is the median of its rounds.
const ROUNDS: usize = 7;

/// The anchor of derivation: what any derivation of these events must do, and nothing more. One
/// set insert per event id (the dedupe: a repeated id is skipped), then, for an event the fold
/// keys by step or tool call, one map update per key: the step of `step:*` and `tool:call`, the
/// call of `tool:call` and `tool:result` (the keys `Deriver` looks up for this run's event
/// types). Keys are borrowed from the events (no copy, where the deriver must own them to outlive
/// a push), payload fields are found by the same linear scan the fold uses, and the hasher is the
/// deriver's (ahash), so the anchor is the cheapest honest form of that work. Returns the ids,
/// steps and calls seen, so nothing is optimised away.
fn anchor_keys(events: &[RunEvent]) -> (usize, usize, usize) {
    fn field<'a>(event: &'a RunEvent, name: &str) -> Option<&'a str> {
        event
            .payload
            .iter()
            .find(|(k, _)| k.as_str() == name)
            .and_then(|(_, v)| v.as_str())
    }
    type Hasher = ahash::RandomState;
    let mut ids: HashSet<&str, Hasher> = HashSet::default();
    let mut steps: HashMap<&str, u32, Hasher> = HashMap::default();
    let mut calls: HashMap<&str, u32, Hasher> = HashMap::default();
    for event in events {
        if !ids.insert(event.id.as_str()) {
            continue;
        }
        let (step, call) = match event.event_type.as_str() {
            "tool:call" => (true, true),
            "tool:result" => (false, true),
            "step:start" | "step:progress" | "step:done" | "step:error" => (true, false),
            _ => (false, false),
        };
        if step && let Some(id) = field(event, "stepId") {
            *steps.entry(id).or_default() += 1;
        }
        if call && let Some(id) = field(event, "callId") {
            *calls.entry(id).or_default() += 1;
        }
    }
    black_box((&ids, &steps, &calls));
    (ids.len(), steps.len(), calls.len())
}

fn median(values: &mut [f64]) -> f64 {
    values.sort_by(f64::total_cmp);
    values[values.len() / 2]
}

fn verdict(met: bool) -> &'static str {
    if met { "met" } else { "MISSED" }
}

/// Wall and process CPU seconds of each round of one contender.
#[derive(Default)]
struct Rounds {
    wall: Vec<f64>,
    cpu: Vec<f64>,
}

impl Rounds {
    /// Times `f` once; its result is dropped before the clock starts again (so a round's memory
    /// is freed by the next contender's round, alike for all).
    fn time<T>(&mut self, f: impl FnOnce() -> T) -> T {
        let cpu = cpu_ns();
        let start = Instant::now();
        let out = black_box(f());
        self.wall.push(start.elapsed().as_secs_f64());
        self.cpu.push(cpu_ns().saturating_sub(cpu) as f64 / 1e9);
        out
    }

    /// Median wall and CPU seconds.
    fn medians(&mut self) -> (f64, f64) {
        (median(&mut self.wall), median(&mut self.cpu))
    }
}

/// Prints a contender's medians against the anchor's, with the ratio of speeds (anchor time over
/// contender time) and its target.
fn report_ratio(what: &str, ours: &mut Rounds, anchor: (f64, f64), events: usize, target: f64) {
    let (wall, cpu) = ours.medians();
    let ratio = anchor.0 / wall;
    println!(
        "  {what:<34} {wall:>7.3} s wall ({:>5.2} M events/s), {cpu:>6.2} s cpu; {ratio:.2}x the anchor (cpu {:.2}x); target >= {target}x: {}",
        events as f64 / wall / 1e6,
        anchor.1 / cpu,
        verdict(ratio >= target)
    );
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = match std::env::var("RUNLOG_BENCH_EVENTS")
        .ok()
        .and_then(|v| v.parse().ok())
    {
        Some(n) => n,
        None if full => FULL_EVENTS,
        None => SMOKE_EVENTS,
    };
    // `RUNLOG_BENCH_ONLY=streamed` stops after the streamed path (for profiling it alone);
    // `RUNLOG_BENCH_ONLY=derive` measures derivation from parsed events against its anchor alone;
    // `RUNLOG_BENCH_ONLY=incremental` measures the incremental deriver alone.
    let only = std::env::var("RUNLOG_BENCH_ONLY").unwrap_or_default();
    if only == "incremental" {
        incremental(&generate(incremental_events(n)), n);
        return;
    }
    if only == "derive" {
        derivation(&generate(n), n);
        return;
    }

    let text = ndjson(n);
    let bytes = text.len() as u64;
    println!(
        "run-log benchmark: {n} events, {:.1} MB of NDJSON ({:.0} B/event); medians of {ROUNDS} alternating rounds",
        mb(bytes),
        bytes as f64 / n as f64
    );

    // End to end, line by line: NDJSON bytes -> coerce -> derive, events never all held. Runs
    // first, once, so the peak memory is its own.
    let (rss_before, _) = memory();
    let state = derive_run_state_from_slice(black_box(&text), &CoerceOptions::default());
    let (rss_after, peak) = memory();
    assert_eq!(state.event_count as usize, n);
    println!("coerce + derive streamed (derive_run_state_from_slice):");
    report_memory(bytes, rss_before, peak);
    // What the returned state holds against what the run needed at its peak: the difference is
    // the path's own working memory (batches, id set growth), not the input.
    println!(
        "memory: the returned state holds {:.1} MB; the peak was {:.1} MB above that",
        mb(rss_after.saturating_sub(rss_before)),
        mb(peak.saturating_sub(rss_after))
    );
    println!(
        "run state: {} steps, {} tool calls, {} errors",
        state.steps.len(),
        state.tool_calls.len(),
        state.errors.len()
    );
    drop(state);
    if only == "streamed" {
        return;
    }

    // Coerce + derive against the parse anchor, rounds alternating.
    let (mut anchor, mut streamed) = (Rounds::default(), Rounds::default());
    for _ in 0..ROUNDS {
        let parsed = anchor.time(|| parse_lines(black_box(&text)));
        assert_eq!(parsed, n);
        let state = streamed
            .time(|| derive_run_state_from_slice(black_box(&text), &CoerceOptions::default()));
        assert_eq!(state.event_count as usize, n);
    }
    let anchor = anchor.medians();
    println!(
        "coerce + derive of NDJSON bytes; anchor: every line parsed into a serde_json Value, one thread: {:.3} s wall ({:.1} MB/s), {:.2} s cpu",
        anchor.0,
        mb(bytes) / anchor.0,
        anchor.1
    );
    report_ratio("derive_run_state_from_slice", &mut streamed, anchor, n, 1.0);
    println!(
        "  (derive_run_state_from_slice: {:.1} MB/s wall)",
        mb(bytes) / median(&mut streamed.wall)
    );

    // Through the full coercer (every event, renderable line and issue held), once, for
    // comparison: no target.
    let (rss_before, _) = memory();
    let mut full_path = Rounds::default();
    let (valid, state) = full_path.time(|| {
        let result = to_run_events_from_slice(black_box(&text), &CoerceOptions::default());
        let valid = result.meta.events;
        (valid, derive_run_state_owned(result.into_events()))
    });
    let (_, peak) = memory();
    assert_eq!(valid, n);
    assert_eq!(state.event_count as usize, n);
    drop(state);
    println!(
        "coerce + derive full (to_run_events_from_slice + derive_run_state_owned), one run, no target: {:.3} s wall, {:.2}x the anchor",
        full_path.wall[0],
        anchor.0 / full_path.wall[0]
    );
    report_memory(bytes, rss_before, peak);
    drop(text);

    // Derivation from parsed events (generated again: the memory figures above are measured
    // without them).
    let events = generate(incremental_events(n));
    derivation(&events[..n], n);
    incremental(&events, n);
}

/// Derivation from the same parsed events against [`anchor_keys`], rounds alternating.
fn derivation(events: &[RunEvent], n: usize) {
    let (mut anchor, mut all, mut each) = (Rounds::default(), Rounds::default(), Rounds::default());
    for _ in 0..ROUNDS {
        let (ids, steps, calls) = anchor.time(|| anchor_keys(black_box(events)));
        assert_eq!(ids, n);
        let state = all.time(|| derive_run_state(black_box(events)));
        assert_eq!(state.event_count as usize, n);
        assert_eq!((state.steps.len(), state.tool_calls.len()), (steps, calls));
        drop(state);
        let state = each.time(|| {
            let mut deriver = Deriver::new();
            for event in black_box(events) {
                black_box(deriver.push(event));
            }
            deriver.into_state()
        });
        assert_eq!(state.event_count as usize, n);
    }
    let anchor = anchor.medians();
    println!(
        "derivation from {n} parsed events; anchor: one set insert per id, one map update per step and call key: {:.3} s wall ({:.2} M events/s), {:.2} s cpu",
        anchor.0,
        n as f64 / anchor.0 / 1e6,
        anchor.1
    );
    report_ratio("derive_run_state (push_all)", &mut all, anchor, n, 0.5);
    report_ratio("Deriver::push, one at a time", &mut each, anchor, n, 0.5);
}

/// How a window of events is handed to the deriver.
type Feed = fn(&mut Deriver, &[RunEvent]);

/// The window at once ([`Deriver::push_all`] folds in groups).
fn feed_all(deriver: &mut Deriver, events: &[RunEvent]) {
    deriver.push_all(events);
}

/// One event at a time, as a host folds events as they arrive.
fn feed_each(deriver: &mut Deriver, events: &[RunEvent]) {
    for event in events {
        black_box(deriver.push(event));
    }
}

/// Events in each timed window of the incremental deriver.
const INCREMENTAL_WINDOW: usize = 1_000;
/// Windows timed at each point of the long stream (the best counts).
const LATE_WINDOWS: usize = 20;

/// Points of the long stream where the incremental deriver is timed, besides its end.
const CHECKPOINTS: [usize; 3] = [10_000, 100_000, 1_000_000];

/// Events the incremental measurement needs for a long stream of `n`.
fn incremental_events(n: usize) -> usize {
    n + (CHECKPOINTS.len() + 1) * LATE_WINDOWS * INCREMENTAL_WINDOW.min(n)
}

/// The incremental deriver's per-event cost near the start and at points of a long stream up to
/// `n` events (each point pushes its timed windows, so the stream passes `n` a little).
fn incremental(events: &[RunEvent], n: usize) {
    let window = INCREMENTAL_WINDOW.min(n);
    let checkpoints: Vec<usize> = CHECKPOINTS
        .into_iter()
        .filter(|&c| c + LATE_WINDOWS * window < n)
        .chain([n])
        .collect();
    // Untimed: the first streams after the previous section's frees pay the allocator's
    // deferred work (purging what was freed), which is no part of a push.
    early_ns(events, window, 50, feed_all);
    for (feed, how) in [
        (feed_all as Feed, "push_all"),
        (feed_each as Feed, "push, one at a time"),
    ] {
        let early = early_ns(events, window, 50, feed);
        let curve = late_ns(events, &checkpoints, window, feed);
        let points: Vec<String> = checkpoints
            .iter()
            .zip(&curve)
            .map(|(c, ns)| format!("{ns:.0} after {c}"))
            .collect();
        let late = curve.last().copied().unwrap_or(early);
        println!(
            "incremental deriver ({how}), no target: ns/event (best {window}-event window of {LATE_WINDOWS}): {early:.0} in a fresh stream, {}; ratio at {n}: {:.2}",
            points.join(", "),
            late / early
        );
    }
}
