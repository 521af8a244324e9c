//! Retention arithmetic shared by the engines: from each bound's cut to the new low-watermark.

use std::time::SystemTime;

use crate::error::{Error, Result};
use crate::types::{Retention, ThreadId, unix_ms};

/// The commit time before which events are past `retention.max_age` at `now`.
pub(crate) fn age_cutoff_ms(retention: &Retention, now: SystemTime) -> i64 {
    let age = i64::try_from(retention.max_age.as_millis()).unwrap_or(i64::MAX);
    unix_ms(now).saturating_sub(age)
}

/// The cut each bound asks for, combined: every event below the returned sequence goes.
///
/// - `bytes_cut`: one past the newest event whose suffix (it and everything after it) is over
///   the byte budget, or `None` when the whole thread fits;
/// - `first_young`: the first event (in sequence order) committed at or after the age cutoff,
///   or `None` when every kept event is past it. Only the prefix before it is trimmed, even if a
///   later event carries an older time;
/// - `checkpoint_through`: the last event the thread's checkpoint covers, if it has one. The cut
///   never passes it: the events after a checkpoint are what its reader folds on top of it, so
///   a thread with a checkpoint can always be rebuilt.
pub(crate) fn new_low_watermark(
    retention: &Retention,
    low_watermark: u64,
    next_seq: u64,
    bytes_cut: Option<u64>,
    first_young: Option<u64>,
    checkpoint_through: Option<u64>,
) -> u64 {
    let count_cut = next_seq.saturating_sub(retention.max_records);
    let age_cut = first_young.unwrap_or(next_seq);
    let wanted = count_cut
        .max(bytes_cut.unwrap_or(0))
        .max(age_cut)
        .min(next_seq)
        .min(checkpoint_through.map_or(u64::MAX, |through| through.saturating_add(1)));
    low_watermark.max(wanted)
}

/// [`new_low_watermark`] from what a trim reads of `thread` as the store holds it (signed
/// integers): its row's `low` and `next`, the newest event over the byte budget, the first
/// young one and the checkpoint's last event. A negative position (a hand-edited store) is
/// [`Error::Corrupt`].
pub(crate) fn stored_low_watermark(
    thread: &ThreadId,
    retention: &Retention,
    low: i64,
    next: i64,
    over_budget: Option<i64>,
    first_young: Option<i64>,
    checkpoint_through: Option<i64>,
) -> Result<u64> {
    let position = |seq: i64| {
        u64::try_from(seq).map_err(|_| Error::Corrupt {
            reason: format!("thread {thread} has a position of {seq}"),
        })
    };
    let optional = |seq: Option<i64>| seq.map(position).transpose();
    Ok(new_low_watermark(
        retention,
        position(low)?,
        position(next)?,
        optional(over_budget)?.map(|seq| seq + 1),
        optional(first_young)?,
        optional(checkpoint_through)?,
    ))
}
