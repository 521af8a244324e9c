//! From coerced text to the run state: the entry points that derive a state
//! ([`derive_run_state_from_slice`], [`CoerceResult::state`], [`LinePlan::derive`]) and the
//! streamed pipeline behind them ([`StreamedState`]), which folds NDJSON line by line straight
//! into the [`Deriver`]: lines are read by the fast line reader, and on a large input pieces of
//! it are scanned as parallel rayon tasks while one thread folds in order. A line the reader
//! declines goes through the coercer's own envelope and payload passes; a log that needs a
//! whole-log rule is declined and coerced whole.

use std::sync::Arc;

use crate::coerce::{
    Body, Candidate, CoerceOptions, CoerceResult, Coercer, IdAction, Issue, LineItem, LinePlan,
    RunTrack, body_kind, envelope, has_second_line, line_ranges, payload, plan_by_line,
    to_run_events_from_slice,
};
use crate::event::{EventKind, RunEvent, parse_event_fast};
use crate::line::{Field, LineEvent, LineReader, Scan, scan_line};
use crate::opaque::Json;
use crate::state::{
    Applied, Deriver, IdCheck, IdHasher, RunState, derive_run_state, derive_run_state_owned,
};
use crate::stream::normalize_in_place;

impl CoerceResult {
    /// The run state of the valid events, normalized (sorted by `seq`, deduplicated by `id`):
    /// what `agentwire runlog state` shows for this result. Events already in `seq` order with
    /// unique ids are what normalizing returns unchanged, so they are derived where they are.
    pub fn state(&self) -> RunState {
        if self.is_normalized() {
            return derive_run_state(self.events());
        }
        let mut events: Vec<RunEvent> = self.events().cloned().collect();
        normalize_in_place(&mut events);
        derive_run_state_owned(events)
    }

    /// [`CoerceResult::state`] of a result the caller gives away.
    pub fn into_state(self) -> RunState {
        let mut events = self.into_events();
        normalize_in_place(&mut events);
        derive_run_state_owned(events)
    }

    /// Whether the valid events are in `seq` order with unique ids.
    fn is_normalized(&self) -> bool {
        let mut ids = ahash::AHashSet::with_capacity(self.meta.events);
        let mut last_seq = 0;
        self.events().all(|e| {
            let in_order = e.seq >= last_seq;
            last_seq = e.seq;
            in_order && ids.insert(e.id.as_str())
        })
    }
}

impl LinePlan<'_> {
    /// The state of the valid events in output order (what `derive_run_state_owned` of the
    /// result's events gives), folded as they come. A plan of one run is normalized already
    /// (its events come in `seq` order with unique ids), so this is then its
    /// [`CoerceResult::state`].
    pub fn derive(&self) -> RunState {
        let mut deriver = Deriver::new();
        for (item, _) in self.items() {
            if let Some(event) = item.as_ref().and_then(LineItem::event) {
                deriver.push(event);
            }
        }
        deriver.into_state()
    }
}

/// The run state of any input text, coerced and normalized: always equal to
/// `to_run_events_from_slice(bytes, options).into_state()`, by the cheapest path that gives it.
///
/// NDJSON of one run whose lines all parse as complete envelopes, with unique ids and `seq`
/// never decreasing, needs no normalizing: it is coerced and folded line by line
/// ([`StreamedState::derive`]), in memory that follows the run state rather than the input.
/// Other NDJSON of one run that the line-by-line coercer takes ([`plan_by_line`]: `seq` never
/// going back, or missing somewhere so the log is renumbered; no id used twice) is coerced a
/// line at a time and folded as it goes, in memory that follows the run state too. Anything
/// else goes through the full coercer.
pub fn derive_run_state_from_slice(bytes: &[u8], options: &CoerceOptions) -> RunState {
    if let Some(state) = StreamedState::derive(bytes, options) {
        return state;
    }
    if let Some(plan) = plan_by_line(bytes, options)
        && plan.run_ids().len() <= 1
    {
        return plan.derive();
    }
    to_run_events_from_slice(bytes, options).into_state()
}

/// Inputs at least this large are streamed with their lines scanned on all cores (rayon's pool),
/// when it has two threads or more.
pub const PIPELINE_MIN_BYTES: usize = 1 << 20;

/// How the streamed path splits its work.
#[derive(Debug, Clone, Copy)]
struct Split {
    /// Inputs at least this large are scanned in parallel.
    parallel_from: usize,
    /// Bytes of input per piece scanned as one task (pieces end at a line's end).
    piece_bytes: usize,
    /// Pieces per round: the fold of one round runs while the next round is scanned.
    round_pieces: usize,
}

const SPLIT: Split = Split {
    parallel_from: PIPELINE_MIN_BYTES,
    piece_bytes: 512 << 10,
    round_pieces: 16,
};

/// [`StreamedState::derive`] with the work split as `split` says.
fn streamed_split(bytes: &[u8], options: &CoerceOptions, split: Split) -> Option<RunState> {
    let trimmed = bytes.trim_ascii();
    // What the full coercer would read as one document (or as nothing) is not streamed.
    if trimmed.is_empty() || !has_second_line(trimmed) || !trimmed.starts_with(b"{") {
        return None;
    }
    let mut fold = StreamFold::new(options);
    // One event per line: the id set is sized once (ids of about 16 bytes; longer ones grow it).
    let lines_hint = memchr::memchr_iter(b'\n', bytes).count() + 1;
    fold.deriver.reserve(lines_hint, lines_hint * 16);
    let parallel = bytes.len() >= split.parallel_from && rayon::current_num_threads() >= 2;
    if parallel {
        fold_pipelined(&mut fold, bytes, 0, Some(lines_hint), split)?;
    } else {
        fold_sequential(&mut fold, &mut LineReader::default(), bytes, 0)?;
    }
    fold.finish()
}

/// Folds the lines of `bytes`, the first of them line `base + 1`, on the calling thread; the
/// line breaks passed, `None` when the log needs the full coercer.
fn fold_sequential(
    fold: &mut StreamFold<'_>,
    reader: &mut LineReader,
    bytes: &[u8],
    base: usize,
) -> Option<usize> {
    let mut ranges = line_ranges(bytes);
    for (line, start, end) in ranges.by_ref() {
        let text = &bytes[start..end];
        match reader.read(text) {
            Some(event) => fold.fast_line(&event, IdCheck::Check(None))?,
            None => fold.line(base + line, parse_event_fast(text)?)?,
        }
    }
    Some(ranges.breaks_passed())
}

/// Bytes of text a caller of [`StreamedState`] reads before each [`StreamedState::push`]: large
/// enough for the parallel scan to overlap the fold for most of a piece, small against a log.
pub const STREAM_PIECE_BYTES: usize = 8 << 20;

/// How a pushed piece is split: rounds of 2 MiB, so that the fold of one overlaps the scan of
/// the next for all but the first round of a piece.
const STREAM_SPLIT: Split = Split {
    parallel_from: PIPELINE_MIN_BYTES,
    piece_bytes: 512 << 10,
    round_pieces: 4,
};

/// The streamed path of [`derive_run_state_from_slice`]: the state of NDJSON coerced and folded
/// line by line, for text held whole ([`StreamedState::derive`]) or arriving in pieces (a file or
/// a pipe read a piece at a time, [`StreamedState::push`]): memory follows the run state, never
/// the text, since a piece is not kept past its `push`.
///
/// [`finish`](StreamedState::finish) gives the state exactly when [`StreamedState::derive`] of
/// the whole text would (and the same state); `None` means the log needs a coercer that sees the
/// whole text: the caller reads it again (or keeps a copy) and asks
/// [`derive_run_state_from_slice`].
pub struct StreamedState<'o> {
    fold: StreamFold<'o>,
    reader: LineReader,
    /// Line breaks in the pieces folded so far.
    base: usize,
    /// Non-blank lines seen, counted up to two.
    lines: u8,
    declined: bool,
}

impl std::fmt::Debug for StreamedState<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("StreamedState")
            .field("line_breaks", &self.base)
            .field("declined", &self.declined)
            .finish_non_exhaustive()
    }
}

impl<'o> StreamedState<'o> {
    /// The streamed path over a whole text alone: the run state when the log can be coerced and
    /// folded line by line (then it equals [`derive_run_state_from_slice`]'s), `None` when it
    /// needs the full coercer (a missing or out-of-order `seq`, a repeated id, a second run, a
    /// line that is not a complete envelope, a degraded payload, no `run:start`, or not NDJSON
    /// at all). For a host that wants to know whether a log streams, or to choose what to do
    /// when it does not. On an input of at least [`PIPELINE_MIN_BYTES`], pieces of it are
    /// scanned in parallel while one thread folds.
    pub fn derive(bytes: &[u8], options: &CoerceOptions) -> Option<RunState> {
        streamed_split(bytes, options, SPLIT)
    }

    /// A fold of a log coerced with `options`.
    pub fn new(options: &'o CoerceOptions) -> Self {
        StreamedState {
            fold: StreamFold::new(options),
            reader: LineReader::default(),
            base: 0,
            lines: 0,
            declined: false,
        }
    }

    /// Folds the next piece of the text. Every piece but the last ends with a line feed (whole
    /// lines only). `false` once the log needs the full coercer; later pieces are then ignored.
    pub fn push(&mut self, piece: &[u8]) -> bool {
        if self.declined {
            return false;
        }
        if self.lines < 2 {
            for (_, start, _) in line_ranges(piece).take(usize::from(2 - self.lines)) {
                // What the full coercer would read as one document is not streamed.
                if self.lines == 0 && piece[start] != b'{' {
                    self.declined = true;
                    return false;
                }
                self.lines += 1;
            }
        }
        let parallel =
            piece.len() >= STREAM_SPLIT.parallel_from && rayon::current_num_threads() >= 2;
        let folded = if parallel {
            fold_pipelined(&mut self.fold, piece, self.base, None, STREAM_SPLIT)
        } else {
            fold_sequential(&mut self.fold, &mut self.reader, piece, self.base)
        };
        match folded {
            Some(breaks) => self.base += breaks,
            None => self.declined = true,
        }
        !self.declined
    }

    /// The run state; `None` when the log needs the full coercer.
    pub fn finish(self) -> Option<RunState> {
        if self.declined || self.lines < 2 {
            return None;
        }
        self.fold.finish()
    }
}

/// The scanned lines of one piece of the input, in order.
#[derive(Debug, Default)]
struct Batch<'a> {
    lines: Vec<ScannedLine<'a>>,
    fields: Vec<Field>,
    /// Line breaks in the piece (the next piece's first line number is this many further on).
    breaks: usize,
}

/// One line as a scanning task hands it over.
#[derive(Debug)]
struct ScannedLine<'a> {
    /// Line number within its piece, from 1.
    line: usize,
    /// The trimmed line.
    raw: &'a [u8],
    /// For the fast path: its text, scan and id hash.
    fast: Option<(&'a str, Scan, u64)>,
    /// The opaque value the fold keeps, made by the scanner.
    prepared: Option<Json>,
}

impl<'a> Batch<'a> {
    /// Scans `piece` into this batch (reusing its allocations).
    fn scan(&mut self, piece: &'a [u8], hasher: &IdHasher) {
        self.lines.clear();
        self.fields.clear();
        let mut ranges = line_ranges(piece);
        for (line, start, end) in ranges.by_ref() {
            let raw = &piece[start..end];
            let mut prepared = None;
            let fast = std::str::from_utf8(raw).ok().and_then(|text| {
                let scan = scan_line(text, &mut self.fields)?;
                let hash = hasher.hash(scan.id(text));
                prepared = LineEvent::new(text, &scan, &self.fields).prepare();
                Some((text, scan, hash))
            });
            self.lines.push(ScannedLine {
                line,
                raw,
                fast,
                prepared,
            });
        }
        self.breaks = ranges.breaks_passed();
    }
}

/// `bytes` cut into pieces of about `size` bytes, each ending just after a line break (or at the
/// end of the input).
fn pieces(bytes: &[u8], size: usize) -> impl Iterator<Item = &[u8]> + '_ {
    let mut rest = bytes;
    std::iter::from_fn(move || {
        if rest.is_empty() {
            return None;
        }
        let cut = match rest.get(size..) {
            None => rest.len(),
            Some(after) => memchr::memchr(b'\n', after).map_or(rest.len(), |i| size + i + 1),
        };
        let (piece, tail) = rest.split_at(cut);
        rest = tail;
        Some(piece)
    })
}

/// [`StreamedState::derive`] on all cores: the input is cut into pieces at line breaks, and pieces are
/// scanned (UTF-8 check, fast read, id hash, opaque values) as parallel tasks, a round of them
/// at a time, while the previous round is folded in order on one thread; a core that is done
/// folding helps scanning. What the fold receives is line slices and their scans, in reused
/// batches, never a parsed value.
///
/// The lines of `bytes` are folded into `fold`, the first of them as line `base + 1`; the answer
/// is the line breaks passed, `None` when the log needs the full coercer. With `lines_hint`
/// (the log's lines) the call list is sized from the first piece.
fn fold_pipelined(
    fold: &mut StreamFold<'_>,
    bytes: &[u8],
    mut base: usize,
    lines_hint: Option<usize>,
    split: Split,
) -> Option<usize> {
    let first_line = base;
    let hasher = fold.deriver.id_hasher();
    let mut pieces = pieces(bytes, split.piece_bytes);
    let mut take_round = || pieces.by_ref().take(split.round_pieces).collect::<Vec<_>>();
    let new_round = || {
        (0..split.round_pieces)
            .map(|_| Batch::default())
            .collect::<Vec<_>>()
    };
    let (mut ready, mut next) = (new_round(), new_round());
    let mut round = take_round();
    scan_round(&mut ready, &round, &hasher);
    let mut sized = lines_hint.is_none();
    while !round.is_empty() {
        let upcoming = take_round();
        let (folded, ()) = rayon::join(
            || {
                for batch in &mut ready[..round.len()] {
                    if !sized {
                        sized = true;
                        size_call_list(fold, batch, lines_hint.unwrap_or(0));
                    }
                    fold_batch(fold, batch, base)?;
                    base += batch.breaks;
                }
                Some(())
            },
            || scan_round(&mut next, &upcoming, &hasher),
        );
        folded?;
        std::mem::swap(&mut ready, &mut next);
        round = upcoming;
    }
    Some(base - first_line)
}

/// Scans the pieces of `round` into the first batches of `batches`, a task per piece.
fn scan_round<'a>(batches: &mut [Batch<'a>], round: &[&'a [u8]], hasher: &IdHasher) {
    use rayon::prelude::*;
    batches[..round.len()]
        .par_iter_mut()
        .zip(round.par_iter())
        .with_max_len(1)
        .for_each(|(batch, piece)| batch.scan(piece, hasher));
}

/// The first batch is a sample of the log: sizes the call list from its share of tool calls (a
/// long run's list would otherwise be copied at every doubling).
fn size_call_list(fold: &mut StreamFold<'_>, batch: &Batch<'_>, lines_hint: usize) {
    let calls = batch
        .lines
        .iter()
        .filter(|l| {
            l.fast
                .is_some_and(|(_, scan, _)| scan.kind() == EventKind::ToolCall)
        })
        .count();
    let estimate = lines_hint.saturating_mul(calls) / batch.lines.len().max(1);
    fold.deriver.reserve_tool_calls(estimate + estimate / 16);
}

/// Folds one scanned batch whose first line is line `base + 1` of the input.
fn fold_batch(fold: &mut StreamFold<'_>, batch: &mut Batch<'_>, base: usize) -> Option<()> {
    // The batch's ids first, in a loop of their own: the id set is large and each lookup a
    // cache miss, and a tight loop keeps many in flight. Any repeated id sends the log to the
    // full coercer, so recording a batch ahead changes no outcome.
    for l in &batch.lines {
        if let Some((text, scan, hash)) = l.fast
            && !fold.deriver.record_id(scan.id(text), hash)
        {
            return None;
        }
    }
    for l in &mut batch.lines {
        match l.fast {
            Some((text, scan, _)) => {
                let event =
                    LineEvent::new(text, &scan, &batch.fields).with_prepared(l.prepared.take());
                fold.fast_line(&event, IdCheck::Recorded)?;
            }
            None => fold.line(base + l.line, parse_event_fast(l.raw)?)?,
        }
    }
    Some(())
}

/// `Some` when the deriver folded the event; a repeated id or another run's event needs the full
/// coercer.
fn folded(applied: Applied) -> Option<()> {
    matches!(applied, Applied::Folded | Applied::Late).then_some(())
}

/// The state of the line-by-line path: the coercer's per-line passes and the deriver.
struct StreamFold<'o> {
    options: &'o CoerceOptions,
    co: Coercer,
    deriver: Deriver,
    track: RunTrack,
    run_id: Option<String>,
    has_start: bool,
    prev_seq: u64,
    last_at: u64,
    fixes: Vec<Issue>,
}

impl<'o> StreamFold<'o> {
    fn new(options: &'o CoerceOptions) -> Self {
        StreamFold {
            options,
            co: Coercer {
                issues: Vec::new(),
                used_ids: Arc::default(),
                next_fresh: 0,
                any_at: true,
                run_from_container: false,
            },
            deriver: Deriver::new(),
            track: RunTrack::default(),
            run_id: None,
            has_start: false,
            prev_seq: 0,
            last_at: options.default_at,
            fixes: Vec::new(),
        }
    }

    /// Folds one line read by the fast reader (a valid event of a known type, so the coercer's
    /// passes have nothing to change); `None` when the log needs the full coercer.
    fn fast_line(&mut self, event: &LineEvent<'_>, id: IdCheck) -> Option<()> {
        self.admit(event.run_id, event.seq)?;
        self.has_start |= event.kind == EventKind::RunStart;
        self.last_at = event.at;
        self.prev_seq = event.seq;
        self.track.record(event.kind, event);
        folded(self.deriver.push_view(event, Some(event.kind), id))
    }

    /// Whether a line of run `run_id` at `seq` may be streamed: the log's one run, `seq` not
    /// going back (the coercer orders payload inference by `seq`).
    fn admit(&mut self, run_id: &str, seq: u64) -> Option<()> {
        match &self.run_id {
            None => self.run_id = Some(run_id.to_owned()),
            Some(run) if run != run_id => return None,
            Some(_) => {}
        }
        (seq >= self.prev_seq).then_some(())
    }

    /// Folds one parsed line; `None` when the log needs the full coercer.
    fn line(&mut self, line: usize, event: RunEvent) -> Option<()> {
        self.admit(&event.run_id, event.seq)?;
        let body = Body::Event(event);
        self.has_start |= body_kind(&body) == Some(EventKind::RunStart);
        let Candidate::Ready { mut event, .. } = envelope(
            &mut self.co,
            line,
            body,
            IdAction::Keep,
            self.run_id.as_deref(),
            &mut self.last_at,
            self.prev_seq,
        ) else {
            return None;
        };
        self.prev_seq = event.seq;
        self.fixes.clear();
        let kind = payload(&mut event, &mut self.track, line, &mut self.fixes).ok()?;
        if let Some(kind) = kind {
            self.track.record(kind, &event);
        }
        folded(self.deriver.push_owned(event))
    }

    fn finish(self) -> Option<RunState> {
        if self.options.synthesize_run_start && !self.has_start {
            return None;
        }
        Some(self.deriver.into_state())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pieces of a few lines, rounds of three: a small log crosses many rounds.
    const TINY: Split = Split {
        parallel_from: 0,
        piece_bytes: 600,
        round_pieces: 3,
    };
    const SEQUENTIAL: Split = Split {
        parallel_from: usize::MAX,
        ..SPLIT
    };

    fn line(seq: u64, id: &str, body: &str) -> String {
        format!(r#"{{"id":"{id}","runId":"r","seq":{seq},"at":{seq},"schemaVersion":1,{body}}}"#)
    }

    /// A run of `calls` tool calls and results over five steps; every seventh call's step title
    /// has an escape, so the fast reader declines it and the strict path folds it.
    fn run_log(calls: u64) -> Vec<String> {
        let mut lines = vec![line(1, "e1", r#""type":"run:start","goal":"g""#)];
        let mut seq = 1;
        for i in 0..calls {
            let step = format!("s{}", i % 5);
            let title = if i % 7 == 0 { "caf\\u00e9" } else { "plain" };
            for body in [
                format!(r#""type":"step:start","stepId":"{step}","title":"{title}""#),
                format!(
                    r#""type":"tool:call","stepId":"{step}","callId":"c{i}","name":"db.query","args":{{"n":{i}}}"#
                ),
                format!(r#""type":"tool:result","callId":"c{i}","ok":true,"result":[{i}],"ms":3"#),
            ] {
                seq += 1;
                lines.push(line(seq, &format!("e{seq}"), &body));
            }
        }
        lines
    }

    fn ndjson(lines: &[String]) -> Vec<u8> {
        (lines.join("\n") + "\n").into_bytes()
    }

    fn full(bytes: &[u8]) -> RunState {
        derive_run_state_owned(
            to_run_events_from_slice(bytes, &CoerceOptions::default()).into_events(),
        )
    }

    #[test]
    fn pieces_cover_the_input_and_end_at_line_breaks() {
        let bytes = ndjson(&run_log(40));
        let cut: Vec<&[u8]> = pieces(&bytes, 600).collect();
        assert!(cut.len() > 10, "{} pieces", cut.len());
        assert_eq!(cut.concat(), bytes);
        for (i, piece) in cut.iter().enumerate() {
            assert_eq!(piece.last(), Some(&b'\n'));
            if i + 1 < cut.len() {
                // Cut at the first line break after 600 bytes.
                assert_eq!(
                    memchr::memchr(b'\n', &piece[600..]),
                    Some(piece.len() - 601)
                );
            }
        }
        // No final line break: the last piece ends with the input.
        let cut = &bytes[..bytes.len() - 1];
        assert_eq!(pieces(cut, 600).collect::<Vec<_>>().concat(), cut);
        assert_eq!(pieces(b"", 600).count(), 0);
    }

    #[test]
    fn parallel_rounds_fold_what_one_thread_folds() {
        let options = CoerceOptions::default();
        let bytes = ndjson(&run_log(120));
        let parallel = streamed_split(&bytes, &options, TINY);
        assert!(parallel.is_some());
        assert_eq!(parallel, streamed_split(&bytes, &options, SEQUENTIAL));
        assert_eq!(parallel, Some(full(&bytes)));
    }

    #[test]
    fn a_repetition_in_a_later_round_needs_the_full_coercer() {
        let options = CoerceOptions::default();
        let clean = run_log(120);
        let last = clean.len() as u64;
        // `e9` is an early fast line, `e2` an early declined one (call 0's step title).
        for (id, body) in [
            (
                "e9",
                r#""type":"step:progress","stepId":"s0","progress":0.5"#,
            ),
            (
                "e2",
                r#""type":"step:progress","stepId":"s0","progress":0.5"#,
            ),
            (
                "e9",
                r#""type":"step:start","stepId":"s0","title":"caf\u00e9""#,
            ),
        ] {
            let mut lines = clean.clone();
            lines.push(line(last + 1, id, body));
            let bytes = ndjson(&lines);
            assert_eq!(streamed_split(&bytes, &options, TINY), None, "{id} {body}");
            assert_eq!(
                streamed_split(&bytes, &options, SEQUENTIAL),
                None,
                "{id} {body}"
            );
        }
        // The same lines with a fresh id stream.
        let mut lines = clean;
        lines.push(line(
            last + 1,
            "fresh",
            r#""type":"step:progress","stepId":"s0""#,
        ));
        let bytes = ndjson(&lines);
        assert_eq!(streamed_split(&bytes, &options, TINY), Some(full(&bytes)));
    }
}
