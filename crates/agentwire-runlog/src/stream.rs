//! Pure helpers over event streams: order by `seq`, dedupe by `id`, append, filter, slice.
//! None of them changes its input; each returns a new list.

use std::cmp::Ordering;
use std::collections::HashSet;

use crate::event::RunEvent;

/// Orders two events by `seq` (never by `at`: clocks of different machines disagree).
pub fn compare_by_seq(a: &RunEvent, b: &RunEvent) -> Ordering {
    a.seq.cmp(&b.seq)
}

/// The events sorted by `seq`; events with equal `seq` keep their input order.
pub fn sort_by_seq(events: &[RunEvent]) -> Vec<RunEvent> {
    let mut out = events.to_vec();
    out.sort_by(compare_by_seq);
    out
}

/// The events without repeated ids; the first delivery of each id wins.
pub fn dedupe_by_id(events: &[RunEvent]) -> Vec<RunEvent> {
    let mut seen = HashSet::with_capacity(events.len());
    events
        .iter()
        .filter(|e| seen.insert(e.id.as_str()))
        .cloned()
        .collect()
}

/// Sorted by `seq`, deduplicated by `id`: the form derivation expects. Exact duplicate
/// deliveries (reconnects, resumed streams) collapse into one event.
pub fn normalize(events: &[RunEvent]) -> Vec<RunEvent> {
    let mut out = dedupe_by_id(events);
    out.sort_by(compare_by_seq);
    out
}

/// In-place form of [`normalize`] for a list the caller owns.
pub fn normalize_in_place(events: &mut Vec<RunEvent>) {
    let mut seen = HashSet::with_capacity(events.len());
    let mut keep = Vec::with_capacity(events.len());
    for event in events.iter() {
        keep.push(seen.insert(event.id.clone()));
    }
    let mut flags = keep.into_iter();
    events.retain(|_| flags.next().unwrap_or(false));
    events.sort_by(compare_by_seq);
}

/// A new stream with `event` appended in `seq` order, unless its id is already there.
pub fn append_event(events: &[RunEvent], event: RunEvent) -> Vec<RunEvent> {
    append_events(events, std::iter::once(event))
}

/// A new stream with every new event inserted in `seq` order; ids already present are skipped.
pub fn append_events(
    events: &[RunEvent],
    new_events: impl IntoIterator<Item = RunEvent>,
) -> Vec<RunEvent> {
    let mut out = events.to_vec();
    let mut seen: HashSet<String> = events.iter().map(|e| e.id.clone()).collect();
    for event in new_events {
        if !seen.insert(event.id.clone()) {
            continue;
        }
        // After the last event with a seq not above the new one: stable for equal seqs.
        let at = out.partition_point(|e| e.seq <= event.seq);
        out.insert(at, event);
    }
    out
}

/// The events of one run.
pub fn filter_by_run(events: &[RunEvent], run_id: &str) -> Vec<RunEvent> {
    events
        .iter()
        .filter(|e| e.run_id == run_id)
        .cloned()
        .collect()
}

/// The events with `seq` strictly greater than `seq` (what a client that has seen `seq` lacks).
pub fn since_seq(events: &[RunEvent], seq: u64) -> Vec<RunEvent> {
    events.iter().filter(|e| e.seq > seq).cloned().collect()
}

/// The events up to and including the event with id `event_id`, in list order; empty when no
/// event has that id (an unknown anchor must not look like the whole stream).
pub fn up_to_event_id(events: &[RunEvent], event_id: &str) -> Vec<RunEvent> {
    match events.iter().position(|e| e.id == event_id) {
        Some(at) => events[..=at].to_vec(),
        None => Vec::new(),
    }
}

/// The highest `seq` of the stream, `None` when it is empty.
pub fn latest_seq(events: &[RunEvent]) -> Option<u64> {
    events.iter().map(|e| e.seq).max()
}
