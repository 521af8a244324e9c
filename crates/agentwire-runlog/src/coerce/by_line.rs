//! The lenient coercer line by line ([`plan_by_line`]): NDJSON whose payload pass may follow
//! the input order is coerced one line at a time, giving the full coercer's output item by item
//! (with each item's issues) without holding the log, so a command's memory follows what it
//! keeps, not the input's size.
//!
//! A first pass over the text gathers what the whole-log rules need (run ids, whether every line
//! has a `seq`, the first `at`, the ids in use, how many ids the envelope pass will generate);
//! each iteration then applies the same envelope, renumbering, `run:start` and payload passes
//! as [`super::to_run_events_from_slice`], in the same order. A log is declined (`None`) when
//! the full coercer would order its payload pass differently from the input (a `seq` going
//! back) or compare lines with each other (an id used twice), and when the text is one JSON
//! document.

use std::borrow::Cow;
use std::collections::VecDeque;
use std::sync::Arc;

use ahash::AHashSet as HashSet;
use serde_json::{Map, Value};

use super::envelope::{Candidate, IdAction, envelope, is_envelope_code, wrap};
use super::payload::{RunTrack, payload};
use super::text::{
    Body, UTF8_BOM, body_at, body_id, body_kind, body_run_id, body_seq, has_second_line,
    line_ranges, parse_body,
};
use super::{
    CoerceMeta, CoerceOptions, CoerceResult, Coercer, DEFAULT_RUN_ID, InputShape, Issue,
    IssueLevel, MalformedLine,
};
use crate::event::{EventKind, RunEvent, SCHEMA_VERSION};

/// One entry of the coercer's output, in output order.
#[derive(Debug, Clone, PartialEq)]
pub enum LineItem {
    /// A valid event of the input (in `events` and `renderable`).
    Event(RunEvent),
    /// A `run:start` inserted for a run that has none (in `events` and `renderable`).
    Synthesized(RunEvent),
    /// A line that could not be repaired: its wrapper (in `renderable`) and its value (in
    /// `malformed`).
    Degraded {
        /// 1-based line.
        line: usize,
        /// The valid envelope of type `malformed` that shows it.
        wrapper: RunEvent,
        /// The value as it came.
        raw: Value,
    },
    /// A line that is not JSON (in `malformed` only).
    Dropped {
        /// 1-based line.
        line: usize,
        /// Its text.
        text: String,
    },
}

impl LineItem {
    /// The valid event of this item (input or synthesized).
    pub fn event(&self) -> Option<&RunEvent> {
        match self {
            LineItem::Event(e) | LineItem::Synthesized(e) => Some(e),
            _ => None,
        }
    }

    /// What `renderable` shows for this item.
    pub fn renderable(&self) -> Option<&RunEvent> {
        match self {
            LineItem::Event(e) | LineItem::Synthesized(e) => Some(e),
            LineItem::Degraded { wrapper, .. } => Some(wrapper),
            LineItem::Dropped { .. } => None,
        }
    }

    /// What `malformed` keeps of this item.
    pub fn malformed(&self) -> Option<MalformedLine> {
        match self {
            LineItem::Degraded { line, raw, .. } => Some(MalformedLine {
                line: *line,
                raw: Some(raw.clone()),
                text: None,
            }),
            LineItem::Dropped { line, text } => Some(MalformedLine {
                line: *line,
                raw: None,
                text: Some(text.clone()),
            }),
            _ => None,
        }
    }
}

/// What the whole-log rules need, gathered in one pass over the text.
#[derive(Debug)]
struct Facts {
    run_ids: Vec<String>,
    lone_run: Option<String>,
    used_ids: Arc<HashSet<String>>,
    first_at: Option<u64>,
    all_have_seq: bool,
    runs_with_start: HashSet<String>,
    any_start_without_run: bool,
    /// Ids the envelope pass generates (lines without a usable id, values that are not
    /// objects).
    fresh_ids: u64,
    /// Non-blank lines.
    lines: usize,
}

/// Text the line-by-line coercer can read as many times as it needs, a line at a time: a file
/// read again on each pass holds one line in memory instead of the whole log.
pub trait LineSource {
    /// A new pass over the text: every line in order without its line feed (a carriage return
    /// before it may stay; lines are trimmed). A source that fails to read ends the pass early
    /// and says so to its own caller.
    fn lines(&self) -> Box<dyn Iterator<Item = Cow<'_, [u8]>> + '_>;
}

impl LineSource for [u8] {
    fn lines(&self) -> Box<dyn Iterator<Item = Cow<'_, [u8]>> + '_> {
        Box::new(self.split(|&b| b == b'\n').map(Cow::Borrowed))
    }
}

/// The text a plan reads.
#[derive(Clone, Copy)]
enum Text<'a> {
    /// Held whole, the byte order mark removed.
    Slice(&'a [u8]),
    /// Read again on each pass.
    Source(&'a dyn LineSource),
}

/// Non-blank lines of a pass, trimmed: `(line number from 1, text)`; the byte order mark of a
/// source's first line is removed.
fn numbered<'a>(text: Text<'a>) -> Box<dyn Iterator<Item = (usize, Cow<'a, [u8]>)> + 'a> {
    match text {
        Text::Slice(bytes) => Box::new(
            line_ranges(bytes).map(move |(n, start, end)| (n, Cow::Borrowed(&bytes[start..end]))),
        ),
        Text::Source(source) => Box::new(source.lines().enumerate().filter_map(|(i, line)| {
            let line = match line {
                Cow::Borrowed(b) if i == 0 => Cow::Borrowed(b.strip_prefix(UTF8_BOM).unwrap_or(b)),
                Cow::Owned(b) if i == 0 && b.starts_with(UTF8_BOM) => {
                    Cow::Owned(b[UTF8_BOM.len()..].to_vec())
                }
                other => other,
            };
            let trimmed = match line {
                Cow::Borrowed(b) => Cow::Borrowed(b.trim_ascii()),
                Cow::Owned(b) if b.trim_ascii().len() == b.len() => Cow::Owned(b),
                Cow::Owned(b) => Cow::Owned(b.trim_ascii().to_vec()),
            };
            (!trimmed.is_empty()).then_some((i + 1, trimmed))
        })),
    }
}

/// A log the line-by-line coercer takes: iterate it with [`LinePlan::items`] as many times as
/// needed (each iteration reads the text again).
pub struct LinePlan<'a> {
    text: Text<'a>,
    options: &'a CoerceOptions,
    bom: bool,
    facts: Facts,
}

impl std::fmt::Debug for LinePlan<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LinePlan")
            .field("bom", &self.bom)
            .field("facts", &self.facts)
            .finish_non_exhaustive()
    }
}

/// Plans the line-by-line coercion of `bytes`; `None` when the text is one JSON document (or
/// empty), or when the log needs the full coercer (a `seq` going back, an id used twice).
pub fn plan_by_line<'a>(bytes: &'a [u8], options: &'a CoerceOptions) -> Option<LinePlan<'a>> {
    let (bytes, bom) = match bytes.strip_prefix(UTF8_BOM) {
        Some(rest) => (rest, true),
        None => (bytes, false),
    };
    let trimmed = bytes.trim_ascii();
    if trimmed.is_empty() || !has_second_line(trimmed) {
        return None;
    }
    // What the full coercer reads as one document (NDJSON fails at the end of its first line).
    if (trimmed.starts_with(b"[") || trimmed.starts_with(b"{"))
        && agentwire_schema::parse_json(trimmed).is_ok()
    {
        return None;
    }
    let facts = gather(Text::Slice(bytes))?;
    Some(LinePlan {
        text: Text::Slice(bytes),
        options,
        bom,
        facts,
    })
}

/// [`plan_by_line`] of text read from `source` on each pass, never held whole: the same plan
/// whenever this gives one. `None` also when the source cannot tell without the whole text
/// whether it is one JSON document (its first line begins an object or array but is not one
/// whole): the caller then reads the text and asks [`plan_by_line`].
pub fn plan_by_line_from<'a>(
    source: &'a dyn LineSource,
    options: &'a CoerceOptions,
) -> Option<LinePlan<'a>> {
    let text = Text::Source(source);
    let mut first_lines = numbered(text);
    let (_, first) = first_lines.next()?;
    first_lines.next()?;
    drop(first_lines);
    // Text with two non-blank lines whose first line is a whole value is not one document; a
    // first line that opens one and does not close it might be the start of one.
    if (first.starts_with(b"[") || first.starts_with(b"{"))
        && agentwire_schema::parse_json(&first).is_err()
    {
        return None;
    }
    let bom = source
        .lines()
        .next()
        .is_some_and(|l| l.starts_with(UTF8_BOM));
    let facts = gather(text)?;
    Some(LinePlan {
        text,
        options,
        bom,
        facts,
    })
}

fn gather(text: Text<'_>) -> Option<Facts> {
    let mut run_ids: Vec<String> = Vec::new();
    let mut last_run: Option<String> = None;
    let mut used_ids = HashSet::new();
    let mut first_at = None;
    let mut all_have_seq = true;
    let mut last_seq = 0;
    let mut seq_went_back = false;
    let mut runs_with_start = HashSet::new();
    let mut any_start_without_run = false;
    let mut fresh_ids = 0u64;
    let mut lines = 0usize;
    let mut any_object = false;
    for (_, line) in numbered(text) {
        lines += 1;
        let body = parse_body(&line);
        match &body {
            Body::Event(_) | Body::Object(_) => {
                any_object |= matches!(body, Body::Object(_));
                match body_seq(&body) {
                    Some(seq) => {
                        seq_went_back |= seq < last_seq;
                        last_seq = seq;
                    }
                    None => all_have_seq = false,
                }
                if first_at.is_none() {
                    first_at = body_at(&body);
                }
            }
            Body::Other(_) => fresh_ids += 1,
            Body::Unparsable(..) => {}
        }
        if let Some(run) = body_run_id(&body)
            && last_run.as_deref() != Some(run)
        {
            if !run_ids.iter().any(|r| r == run) {
                run_ids.push(run.to_owned());
            }
            last_run = Some(run.to_owned());
        }
        if body_kind(&body) == Some(EventKind::RunStart) {
            match body_run_id(&body) {
                Some(run) => {
                    runs_with_start.insert(run.to_owned());
                }
                None => any_start_without_run = true,
            }
        }
        match body_id(&body) {
            Some(id) if !used_ids.insert(id.to_owned()) => return None,
            Some(_) => {}
            None if matches!(body, Body::Object(_)) => fresh_ids += 1,
            None => {}
        }
    }
    // The payload pass follows `seq`; renumbered logs follow the input.
    if all_have_seq && seq_went_back {
        return None;
    }
    let lone_run = match run_ids.as_slice() {
        [] => Some(DEFAULT_RUN_ID.to_owned()),
        [one] => Some(one.clone()),
        _ => None,
    };
    if run_ids.is_empty() && any_object {
        run_ids.push(DEFAULT_RUN_ID.to_owned());
    }
    Some(Facts {
        run_ids,
        lone_run,
        used_ids: Arc::new(used_ids),
        first_at,
        all_have_seq,
        runs_with_start,
        any_start_without_run,
        fresh_ids,
        lines,
    })
}

impl LinePlan<'_> {
    /// Runs the log names, in order of appearance (`meta.runIds`).
    pub fn run_ids(&self) -> &[String] {
        &self.facts.run_ids
    }

    /// Non-blank lines (`meta.lines`).
    pub fn lines(&self) -> usize {
        self.facts.lines
    }

    /// The output, item by item, each with its issues (sorted by line across items, as in
    /// [`CoerceResult::issues`]).
    pub fn items(&self) -> ByLine<'_> {
        let facts = &self.facts;
        let co = Coercer {
            issues: Vec::new(),
            used_ids: Arc::clone(&facts.used_ids),
            next_fresh: 0,
            any_at: facts.first_at.is_some(),
            run_from_container: false,
        };
        // Synthesized starts take the ids after every id the envelope pass generates.
        let mut synth = Coercer {
            issues: Vec::new(),
            used_ids: Arc::default(),
            next_fresh: 0,
            any_at: false,
            run_from_container: false,
        };
        let mut n = 0u64;
        for _ in 0..facts.fresh_ids {
            loop {
                n += 1;
                if !facts.used_ids.contains(&format!("e_{n}")) {
                    break;
                }
            }
        }
        synth.next_fresh = n;
        let may_synthesize = self.options.synthesize_run_start
            && !(facts.any_start_without_run && facts.lone_run.is_some());
        let mut pending = VecDeque::new();
        if self.bom {
            pending.push_back((
                None,
                vec![Issue {
                    level: IssueLevel::Fixed,
                    line: 1,
                    code: "bom-stripped",
                    message: "the text starts with a UTF-8 byte order mark (EF BB BF); removed"
                        .into(),
                }],
            ));
        }
        ByLine {
            plan: self,
            lines: numbered(self.text),
            co,
            synth,
            done: facts.runs_with_start.clone(),
            may_synthesize,
            tracks: Vec::new(),
            last_at: facts.first_at.unwrap_or(self.options.default_at),
            prev_seq: 0,
            seq: 0,
            pending,
        }
    }

    /// The whole result, as [`super::to_run_events_from_slice`] gives it (for tests and for
    /// callers that want it all).
    pub fn collect(&self) -> CoerceResult {
        let mut meta = MetaCount::new(self);
        let mut renderable = Vec::new();
        let mut valid = Vec::new();
        let mut malformed = Vec::new();
        let mut issues = Vec::new();
        for (item, item_issues) in self.items() {
            meta.count(item.as_ref(), &item_issues);
            issues.extend(item_issues);
            let Some(item) = item else { continue };
            if let Some(m) = item.malformed() {
                malformed.push(m);
            }
            match item {
                LineItem::Event(e) | LineItem::Synthesized(e) => {
                    renderable.push(e);
                    valid.push(true);
                }
                LineItem::Degraded { wrapper, .. } => {
                    renderable.push(wrapper);
                    valid.push(false);
                }
                LineItem::Dropped { .. } => {}
            }
        }
        CoerceResult {
            renderable,
            valid,
            malformed,
            issues,
            meta: meta.finish(),
        }
    }
}

/// Counts `meta` while the items pass by.
#[derive(Debug)]
pub struct MetaCount {
    meta: CoerceMeta,
    last_fixed_line: Option<usize>,
}

impl MetaCount {
    /// Counting for the log of `plan`.
    pub fn new(plan: &LinePlan<'_>) -> MetaCount {
        MetaCount {
            meta: CoerceMeta {
                input: InputShape::Ndjson,
                lines: plan.facts.lines,
                events: 0,
                renderable: 0,
                malformed: 0,
                fixed: 0,
                degraded: 0,
                dropped: 0,
                synthesized: 0,
                run_ids: plan.facts.run_ids.clone(),
                goal: None,
            },
            last_fixed_line: None,
        }
    }

    /// Counts one item of [`LinePlan::items`] and its issues.
    pub fn count(&mut self, item: Option<&LineItem>, issues: &[Issue]) {
        for issue in issues.iter().filter(|i| i.level == IssueLevel::Fixed) {
            if self.last_fixed_line != Some(issue.line) {
                self.meta.fixed += 1;
                self.last_fixed_line = Some(issue.line);
            }
        }
        let m = &mut self.meta;
        match item {
            Some(LineItem::Event(e) | LineItem::Synthesized(e)) => {
                m.events += 1;
                m.renderable += 1;
                if matches!(item, Some(LineItem::Synthesized(_))) {
                    m.synthesized += 1;
                }
                if m.goal.is_none() && e.kind() == Some(EventKind::RunStart) {
                    m.goal = e.str_field("goal").map(str::to_owned);
                }
            }
            Some(LineItem::Degraded { .. }) => {
                m.degraded += 1;
                m.renderable += 1;
                m.malformed += 1;
            }
            Some(LineItem::Dropped { .. }) => {
                m.dropped += 1;
                m.malformed += 1;
            }
            None => {}
        }
    }

    /// The counts.
    pub fn finish(self) -> CoerceMeta {
        self.meta
    }
}

/// The iterator of [`LinePlan::items`]: each item with its issues; an item of `None` carries
/// issues of no line's own (the byte order mark).
pub struct ByLine<'p> {
    plan: &'p LinePlan<'p>,
    lines: Box<dyn Iterator<Item = (usize, Cow<'p, [u8]>)> + 'p>,
    co: Coercer,
    synth: Coercer,
    /// Runs that have a `run:start`, given or synthesized.
    done: HashSet<String>,
    may_synthesize: bool,
    tracks: Vec<(String, RunTrack)>,
    last_at: u64,
    prev_seq: u64,
    /// The last seq given when the log is renumbered.
    seq: u64,
    pending: VecDeque<(Option<LineItem>, Vec<Issue>)>,
}

impl std::fmt::Debug for ByLine<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ByLine")
            .field("seq", &self.seq)
            .finish_non_exhaustive()
    }
}

impl std::fmt::Debug for Coercer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Coercer")
            .field("next_fresh", &self.next_fresh)
            .finish_non_exhaustive()
    }
}

impl Iterator for ByLine<'_> {
    type Item = (Option<LineItem>, Vec<Issue>);

    fn next(&mut self) -> Option<Self::Item> {
        loop {
            if let Some(next) = self.pending.pop_front() {
                return Some(next);
            }
            let (line, text) = self.lines.next()?;
            self.step(line, &text);
        }
    }
}

impl ByLine<'_> {
    /// Coerces one line into `pending`: a synthesized start first when its run needs one.
    fn step(&mut self, line: usize, text: &[u8]) {
        let facts = &self.plan.facts;
        let renumber = !facts.all_have_seq;
        let candidate = envelope(
            &mut self.co,
            line,
            parse_body(text),
            IdAction::Keep,
            facts.lone_run.as_deref(),
            &mut self.last_at,
            self.prev_seq,
        );
        if let Candidate::Ready { event, .. } | Candidate::Degraded { wrapper: event, .. } =
            &candidate
        {
            self.prev_seq = event.seq;
        }
        // Issues the envelope pass reported itself (degraded or dropped lines).
        let mut issues = std::mem::take(&mut self.co.issues);
        match candidate {
            Candidate::Dropped(text) => {
                self.pending
                    .push_back((Some(LineItem::Dropped { line, text }), issues));
            }
            Candidate::Degraded { mut wrapper, raw } => {
                if renumber {
                    self.seq += 1;
                    wrapper.seq = self.seq;
                }
                self.pending
                    .push_back((Some(LineItem::Degraded { line, wrapper, raw }), issues));
            }
            Candidate::Ready {
                mut event,
                raw,
                mut fixes,
            } => {
                if self.may_synthesize && !self.done.contains(&event.run_id) {
                    self.done.insert(event.run_id.clone());
                    let mut start = RunEvent {
                        id: self.synth.fresh_id_unused(&facts.used_ids),
                        run_id: event.run_id.clone(),
                        // The seqs never go back, so this line holds its run's smallest.
                        seq: event.seq.saturating_sub(1),
                        at: event.at,
                        schema_version: SCHEMA_VERSION,
                        event_type: EventKind::RunStart.wire_name().to_owned(),
                        payload: Map::new(),
                    };
                    if renumber {
                        self.seq += 1;
                        start.seq = self.seq;
                    }
                    let message = format!(
                        "run {} has no run:start; inserted {} before line {line} so the run has \
                         a header (no goal: none was given)",
                        start.run_id, start.id
                    );
                    self.pending.push_back((
                        Some(LineItem::Synthesized(start)),
                        vec![Issue {
                            level: IssueLevel::Fixed,
                            line,
                            code: "run-start-synthesized",
                            message,
                        }],
                    ));
                }
                if renumber {
                    self.seq += 1;
                    let seq = self.seq;
                    let old = std::mem::replace(&mut event.seq, seq);
                    let had = old != u64::MAX;
                    if !had || old != seq {
                        let message = if had {
                            format!(
                                "seq {old} replaced by {seq}: some lines lack seq, so the whole \
                                 log is renumbered in input order"
                            )
                        } else {
                            format!("seq missing; renumbered in input order to {seq}")
                        };
                        fixes.push(Issue {
                            level: IssueLevel::Fixed,
                            line,
                            code: "seq-renumbered",
                            message,
                        });
                    }
                }
                let t = match self.tracks.iter().position(|(r, _)| *r == event.run_id) {
                    Some(t) => t,
                    None => {
                        self.tracks
                            .push((event.run_id.clone(), RunTrack::default()));
                        self.tracks.len() - 1
                    }
                };
                let track = &mut self.tracks[t].1;
                match payload(&mut event, track, line, &mut fixes) {
                    Ok(kind) => {
                        if let Some(kind) = kind {
                            track.record(kind, &event);
                        }
                        issues.extend(fixes);
                        self.pending
                            .push_back((Some(LineItem::Event(event)), issues));
                    }
                    Err(degrade) => {
                        let raw = raw.map_or_else(|| event.to_value(), |raw| raw.to_value());
                        issues.extend(fixes.into_iter().filter(|f| is_envelope_code(f.code)));
                        let codes: Vec<&str> = degrade.iter().map(|(c, _)| *c).collect();
                        let wrapper = wrap(&event, line, &codes, raw.clone());
                        for (code, message) in degrade {
                            issues.push(Issue {
                                level: IssueLevel::Degraded,
                                line,
                                code,
                                message,
                            });
                        }
                        self.pending
                            .push_back((Some(LineItem::Degraded { line, wrapper, raw }), issues));
                    }
                }
            }
            Candidate::Valid(_) => {}
        }
    }
}

impl Coercer {
    /// [`Coercer::fresh_id`] against the input's ids, for a coercer that holds none itself.
    fn fresh_id_unused(&mut self, used: &HashSet<String>) -> String {
        loop {
            self.next_fresh += 1;
            let id = format!("e_{}", self.next_fresh);
            if !used.contains(&id) {
                return id;
            }
        }
    }
}

/// Serialized as the [`CoerceResult`] it stands for, field by field, each list written from a
/// pass over the log (so the output is never held whole).
impl serde::Serialize for LinePlan<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct;
        use std::cell::RefCell;

        /// One list of the result, written from its own pass; the events' pass counts `meta`.
        struct Pass<'a, 'p> {
            plan: &'a LinePlan<'p>,
            list: List,
            meta: &'a RefCell<Option<CoerceMeta>>,
        }
        #[derive(Clone, Copy)]
        enum List {
            Events,
            Renderable,
            Malformed,
            Issues,
        }
        impl serde::Serialize for Pass<'_, '_> {
            fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
                use serde::ser::SerializeSeq;
                let mut seq = s.serialize_seq(None)?;
                let mut meta = MetaCount::new(self.plan);
                for (item, issues) in self.plan.items() {
                    match self.list {
                        List::Events => {
                            meta.count(item.as_ref(), &issues);
                            if let Some(e) = item.as_ref().and_then(LineItem::event) {
                                seq.serialize_element(e)?;
                            }
                        }
                        List::Renderable => {
                            if let Some(e) = item.as_ref().and_then(LineItem::renderable) {
                                seq.serialize_element(e)?;
                            }
                        }
                        List::Malformed => {
                            if let Some(m) = item.as_ref().and_then(LineItem::malformed) {
                                seq.serialize_element(&m)?;
                            }
                        }
                        List::Issues => {
                            for issue in &issues {
                                seq.serialize_element(issue)?;
                            }
                        }
                    }
                }
                if matches!(self.list, List::Events) {
                    *self.meta.borrow_mut() = Some(meta.finish());
                }
                seq.end()
            }
        }

        let meta = RefCell::new(None);
        let pass = |list| Pass {
            plan: self,
            list,
            meta: &meta,
        };
        let mut s = serializer.serialize_struct("CoerceResult", 5)?;
        s.serialize_field("events", &pass(List::Events))?;
        s.serialize_field("renderable", &pass(List::Renderable))?;
        s.serialize_field("malformed", &pass(List::Malformed))?;
        s.serialize_field("issues", &pass(List::Issues))?;
        let meta = meta.take().unwrap_or_else(|| {
            let mut count = MetaCount::new(self);
            for (item, issues) in self.items() {
                count.count(item.as_ref(), &issues);
            }
            count.finish()
        });
        s.serialize_field("meta", &meta)?;
        s.end()
    }
}
