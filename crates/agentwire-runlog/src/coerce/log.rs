//! The whole-log coercer: the passes over every line of a log (facts, envelope, synthesized
//! `run:start`, renumbering, payloads in `seq` order, the container's goal) and the result they
//! build.

use std::sync::Arc;

use ahash::{AHashMap as HashMap, AHashSet as HashSet};
use serde_json::{Map, Value};

use super::envelope::{Candidate, IdAction, envelope, is_envelope_code, wrap};
use super::payload::{RunTrack, payload};
use super::text::{
    Body, Container, Row, bodies_equal, body_at, body_id, body_kind, body_run_id, body_seq,
};
use super::{
    CoerceMeta, CoerceOptions, CoerceResult, Coercer, DEFAULT_RUN_ID, InputShape, Issue,
    IssueLevel, MalformedLine, fixed_lines,
};
use crate::event::{EventKind, RunEvent, SCHEMA_VERSION};

/// Coerces the lines of a whole log: every pass in turn, then the result in input order.
pub(crate) fn coerce_rows(
    mut rows: Vec<Row>,
    shape: InputShape,
    options: &CoerceOptions,
    mut container: Container,
) -> CoerceResult {
    let facts = LogFacts::of(&rows, &container);
    let mut co = Coercer {
        issues: Vec::new(),
        used_ids: Arc::default(),
        next_fresh: 0,
        any_at: facts.first_at.is_some(),
        run_from_container: container.run_id.is_some(),
    };
    if facts.may_generate_ids() {
        co.used_ids = Arc::new(
            rows.iter()
                .filter_map(|r| body_id(&r.body))
                .map(str::to_owned)
                .collect(),
        );
    }
    let lone_run = facts.lone_run(&container);
    let mut run_ids = facts.run_ids.clone();
    if run_ids.is_empty() && rows.iter().any(|r| matches!(r.body, Body::Object(_))) {
        run_ids.push(DEFAULT_RUN_ID.to_owned());
    }

    let mut log = envelopes(&mut co, &mut rows, &facts, lone_run.as_deref(), options);
    // Every body has moved into its candidate.
    drop(rows);
    if options.synthesize_run_start && !(facts.any_start_without_run && lone_run.is_some()) {
        synthesize_starts(&mut co, &mut log, facts.runs_with_start, &mut container);
    }
    if !facts.all_have_seq {
        renumber(&mut log);
    }
    payloads(&mut co, &mut log);
    container_goal(&mut co, &mut log, &mut container);
    output(co, log, shape, run_ids, container)
}

/// Facts about the whole log, gathered before anything changes.
struct LogFacts {
    /// Runs named (the container's first), in order of appearance.
    run_ids: Vec<String>,
    all_have_seq: bool,
    first_at: Option<u64>,
    /// What the envelope pass does with each line's id.
    id_actions: Vec<IdAction>,
    runs_with_start: HashSet<String>,
    /// Whether some `run:start` names no run.
    any_start_without_run: bool,
    /// Whether some line has no usable id.
    any_without_id: bool,
}

impl LogFacts {
    fn of(rows: &[Row], container: &Container) -> LogFacts {
        let mut facts = LogFacts {
            run_ids: container.run_id.iter().cloned().collect(),
            all_have_seq: true,
            first_at: None,
            id_actions: vec![IdAction::Keep; rows.len()],
            runs_with_start: HashSet::new(),
            any_start_without_run: false,
            any_without_id: false,
        };
        let mut first_by_id: HashMap<&str, usize> = HashMap::with_capacity(rows.len());
        let mut last_run: Option<&str> = container.run_id.as_deref();
        for (i, row) in rows.iter().enumerate() {
            if matches!(row.body, Body::Event(_) | Body::Object(_)) {
                facts.all_have_seq &= body_seq(&row.body).is_some();
                if facts.first_at.is_none() {
                    facts.first_at = body_at(&row.body);
                }
            }
            if let Some(run) = body_run_id(&row.body) {
                if last_run != Some(run) && !facts.run_ids.iter().any(|r| r == run) {
                    facts.run_ids.push(run.to_owned());
                }
                last_run = Some(run);
            }
            if body_kind(&row.body) == Some(EventKind::RunStart) {
                match body_run_id(&row.body) {
                    Some(run) => {
                        facts.runs_with_start.insert(run.to_owned());
                    }
                    None => facts.any_start_without_run = true,
                }
            }
            let Some(id) = body_id(&row.body) else {
                facts.any_without_id = true;
                continue;
            };
            match first_by_id.get(id) {
                None => {
                    first_by_id.insert(id, i);
                }
                Some(&first) => {
                    facts.id_actions[i] = if bodies_equal(&rows[first].body, &row.body) {
                        IdAction::Duplicate(rows[first].line)
                    } else {
                        IdAction::Reassign(rows[first].line)
                    };
                }
            }
        }
        facts
    }

    /// Whether the passes may have to generate an id (then the ids in use are gathered first).
    fn may_generate_ids(&self) -> bool {
        self.id_actions
            .iter()
            .any(|a| matches!(a, IdAction::Reassign(_)))
            || self.any_without_id
            || self
                .run_ids
                .iter()
                .any(|r| !self.runs_with_start.contains(r))
            || self.run_ids.is_empty()
    }

    /// The run of the lines that name none: the container's, the log's only one, or
    /// [`DEFAULT_RUN_ID`] when the log names none; `None` when it names several.
    fn lone_run(&self, container: &Container) -> Option<String> {
        match (&container.run_id, self.run_ids.as_slice()) {
            (Some(run), _) => Some(run.clone()),
            (None, []) => Some(DEFAULT_RUN_ID.to_owned()),
            (None, [one]) => Some(one.clone()),
            (None, _) => None,
        }
    }
}

/// The log between the passes: each line's candidate and line number, and the `run:start`s
/// synthesized before the candidate at their position.
struct Log {
    candidates: Vec<Candidate>,
    lines: Vec<usize>,
    synthesized: Vec<(usize, RunEvent)>,
}

/// The envelope pass, line by line in input order.
fn envelopes(
    co: &mut Coercer,
    rows: &mut [Row],
    facts: &LogFacts,
    lone_run: Option<&str>,
    options: &CoerceOptions,
) -> Log {
    let mut candidates: Vec<Candidate> = Vec::with_capacity(rows.len());
    let mut lines: Vec<usize> = Vec::with_capacity(rows.len());
    let mut last_at = facts.first_at.unwrap_or(options.default_at);
    let mut prev_seq = 0u64;
    for (row, &id_action) in rows.iter_mut().zip(&facts.id_actions) {
        lines.push(row.line);
        let body = std::mem::replace(&mut row.body, Body::Other(Value::Null));
        let candidate = envelope(
            co,
            row.line,
            body,
            id_action,
            lone_run,
            &mut last_at,
            prev_seq,
        );
        if let Candidate::Ready { event, .. } | Candidate::Degraded { wrapper: event, .. } =
            &candidate
        {
            prev_seq = event.seq;
        }
        candidates.push(candidate);
    }
    Log {
        candidates,
        lines,
        synthesized: Vec::new(),
    }
}

/// A `run:start` for each run that has none, before the run's first line. For a run whose first
/// event has seq 0 the synthesized start shares seq 0; equal seqs keep list order, and the start
/// comes first.
fn synthesize_starts(
    co: &mut Coercer,
    log: &mut Log,
    runs_with_start: HashSet<String>,
    container: &mut Container,
) {
    let mut min_seq: HashMap<&str, u64> = HashMap::new();
    for c in &log.candidates {
        if let Candidate::Ready { event, .. } = c {
            let m = min_seq.entry(event.run_id.as_str()).or_insert(event.seq);
            *m = (*m).min(event.seq);
        }
    }
    let mut done: HashSet<String> = runs_with_start;
    for (pos, c) in log.candidates.iter().enumerate() {
        let Candidate::Ready { event, .. } = c else {
            continue;
        };
        if done.contains(&event.run_id) {
            continue;
        }
        done.insert(event.run_id.clone());
        let mut payload = Map::new();
        if container.run_id.as_deref() == Some(event.run_id.as_str())
            && let Some(goal) = container.goal.take()
        {
            payload.insert("goal".into(), Value::String(goal));
        }
        log.synthesized.push((
            pos,
            RunEvent {
                id: String::new(),
                run_id: event.run_id.clone(),
                seq: min_seq
                    .get(event.run_id.as_str())
                    .map_or(0, |s| s.saturating_sub(1)),
                at: event.at,
                schema_version: SCHEMA_VERSION,
                event_type: EventKind::RunStart.wire_name().to_owned(),
                payload,
            },
        ));
    }
    for (pos, event) in &mut log.synthesized {
        event.id = co.fresh_id();
        let line = log.lines[*pos];
        let goal = if event.payload.contains_key("goal") {
            "with the container's goal"
        } else {
            "no goal: none was given"
        };
        co.issue(
            IssueLevel::Fixed,
            line,
            "run-start-synthesized",
            format!(
                "run {} has no run:start; inserted {} before line {line} so the run has a header \
                 ({goal})",
                event.run_id, event.id
            ),
        );
    }
}

/// Renumbers `seq` in list order (for a log where some line lacks one).
fn renumber(log: &mut Log) {
    let mut seq = 0u64;
    let mut synth = log.synthesized.iter_mut().peekable();
    for (pos, c) in log.candidates.iter_mut().enumerate() {
        while let Some((_, event)) = synth.next_if(|(p, _)| *p == pos) {
            seq += 1;
            event.seq = seq;
        }
        let line = log.lines[pos];
        let (event, fixes) = match c {
            Candidate::Ready { event, fixes, .. } => (event, fixes),
            Candidate::Degraded { wrapper, .. } => {
                // A wrapper's seq only places it in the timeline.
                seq += 1;
                wrapper.seq = seq;
                continue;
            }
            _ => continue,
        };
        seq += 1;
        let old = std::mem::replace(&mut event.seq, seq);
        let had = old != u64::MAX;
        if !had || old != seq {
            let message = if had {
                format!(
                    "seq {old} replaced by {seq}: some lines lack seq, so the whole log is \
                     renumbered in input order"
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
}

/// The payload pass, in `seq` order (the order the events happened in), with one pairing
/// track per run.
fn payloads(co: &mut Coercer, log: &mut Log) {
    let candidates = &mut log.candidates;
    let mut order: Vec<usize> = (0..candidates.len()).collect();
    order.sort_by_key(|&i| match &candidates[i] {
        Candidate::Ready { event, .. } | Candidate::Degraded { wrapper: event, .. } => event.seq,
        _ => 0,
    });
    let mut tracks = Tracks::default();
    for i in order {
        let Candidate::Ready { .. } = &candidates[i] else {
            continue;
        };
        let line = log.lines[i];
        let placeholder = Candidate::Dropped(String::new());
        let Candidate::Ready {
            mut event,
            raw,
            mut fixes,
        } = std::mem::replace(&mut candidates[i], placeholder)
        else {
            continue;
        };
        let track = tracks.of(&event.run_id);
        match payload(&mut event, track, line, &mut fixes) {
            Ok(kind) => {
                if let Some(kind) = kind {
                    track.record(kind, &event);
                }
                co.issues.extend(fixes);
                candidates[i] = Candidate::Valid(event);
            }
            Err(degrade) => {
                let raw = raw.map_or_else(|| event.to_value(), |raw| raw.to_value());
                // Envelope fixes are visible in the wrapper; payload fixes did not happen.
                co.issues
                    .extend(fixes.into_iter().filter(|fix| is_envelope_code(fix.code)));
                let codes: Vec<&str> = degrade.iter().map(|(c, _)| *c).collect();
                for (code, message) in &degrade {
                    co.issue(IssueLevel::Degraded, line, code, message.clone());
                }
                let wrapper = wrap(&event, line, &codes, raw.clone());
                candidates[i] = Candidate::Degraded { wrapper, raw };
            }
        }
    }
}

/// The pairing tracks of the runs, the last one used found first (lines of one run come
/// together).
#[derive(Default)]
struct Tracks {
    runs: Vec<(String, RunTrack)>,
    last: usize,
}

impl Tracks {
    fn of(&mut self, run_id: &str) -> &mut RunTrack {
        if self.runs.get(self.last).is_none_or(|(r, _)| r != run_id) {
            self.last = match self.runs.iter().position(|(r, _)| r == run_id) {
                Some(t) => t,
                None => {
                    self.runs.push((run_id.to_owned(), RunTrack::default()));
                    self.runs.len() - 1
                }
            };
        }
        &mut self.runs[self.last].1
    }
}

/// The container's goal goes to its run's first `run:start` when that has none; a goal that
/// could not be used stays with the container's other keys.
fn container_goal(co: &mut Coercer, log: &mut Log, container: &mut Container) {
    let Some(goal) = container.goal.take() else {
        return;
    };
    let Some(run) = &container.run_id else {
        container.rest.insert("goal".into(), Value::String(goal));
        return;
    };
    let start = log
        .candidates
        .iter_mut()
        .enumerate()
        .find_map(|(pos, c)| match c {
            Candidate::Valid(e) if e.run_id == *run && e.kind() == Some(EventKind::RunStart) => {
                Some((pos, e))
            }
            _ => None,
        });
    match start {
        Some((pos, e)) if !e.payload.contains_key("goal") => {
            e.payload.insert("goal".into(), Value::String(goal));
            co.issue(
                IssueLevel::Fixed,
                log.lines[pos],
                "goal-from-container",
                format!("run:start of run {run} has no goal; took the container's goal"),
            );
        }
        Some((_, e)) if e.str_field("goal") == Some(goal.as_str()) => {}
        _ => {
            container.rest.insert("goal".into(), Value::String(goal));
        }
    }
}

/// The result, in input order: synthesized starts before their line, wrappers in place of
/// degraded lines, the container's unread keys first in `malformed`.
fn output(
    mut co: Coercer,
    log: Log,
    shape: InputShape,
    run_ids: Vec<String>,
    container: Container,
) -> CoerceResult {
    let Log {
        candidates,
        lines,
        synthesized,
    } = log;
    let mut renderable = Vec::with_capacity(candidates.len() + synthesized.len());
    let mut valid = Vec::with_capacity(candidates.len() + synthesized.len());
    let mut malformed = Vec::new();
    let mut meta = CoerceMeta {
        input: shape,
        lines: candidates.len(),
        events: 0,
        renderable: 0,
        malformed: 0,
        fixed: 0,
        degraded: 0,
        dropped: 0,
        synthesized: synthesized.len(),
        run_ids,
        goal: None,
    };
    let mut synth = synthesized.into_iter().peekable();
    for (pos, c) in candidates.into_iter().enumerate() {
        while let Some((_, event)) = synth.next_if(|(p, _)| *p == pos) {
            if meta.goal.is_none() {
                meta.goal = event.str_field("goal").map(str::to_owned);
            }
            renderable.push(event);
            valid.push(true);
        }
        match c {
            Candidate::Valid(event) => {
                if meta.goal.is_none() && event.kind() == Some(EventKind::RunStart) {
                    meta.goal = event.str_field("goal").map(str::to_owned);
                }
                renderable.push(event);
                valid.push(true);
            }
            Candidate::Degraded { wrapper, raw } => {
                meta.degraded += 1;
                malformed.push(MalformedLine {
                    line: lines[pos],
                    raw: Some(raw),
                    text: None,
                });
                renderable.push(wrapper);
                valid.push(false);
            }
            Candidate::Dropped(text) => {
                meta.dropped += 1;
                malformed.push(MalformedLine {
                    line: lines[pos],
                    raw: None,
                    text: Some(text),
                });
            }
            Candidate::Ready { .. } => {}
        }
    }
    if !container.rest.is_empty() {
        co.issue(
            IssueLevel::Degraded,
            0,
            "container-keys-kept",
            container_keys_message(&container.rest),
        );
        malformed.insert(
            0,
            MalformedLine {
                line: 0,
                raw: Some(Value::Object(container.rest)),
                text: None,
            },
        );
    }
    meta.events = valid.iter().filter(|v| **v).count();
    meta.renderable = renderable.len();
    meta.malformed = malformed.len();
    let mut issues = co.issues;
    issues.sort_by_key(|i| i.line);
    meta.fixed = fixed_lines(&issues);
    CoerceResult {
        renderable,
        valid,
        malformed,
        issues,
        meta,
    }
}

/// The sentence of a `container-keys-kept` issue.
fn container_keys_message(rest: &Map<String, Value>) -> String {
    let keys: Vec<&str> = rest.keys().map(String::as_str).collect();
    format!(
        "the container's {} {} {} not read as events or run facts: kept in malformed (line 0)",
        if keys.len() == 1 { "key" } else { "keys" },
        keys.join(", "),
        if keys.len() == 1 { "is" } else { "are" }
    )
}
