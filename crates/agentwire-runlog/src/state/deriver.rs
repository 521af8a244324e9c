//! The fold: [`Deriver`], which folds events one at a time into a [`RunState`] (deduplicating
//! ids, skipping other runs' events, applying each event kind's rule), and
//! [`derive_run_state`], the same over a whole stream.

use std::borrow::Cow;

use serde_json::{Number, Value};

use super::event_view::{EventView, Key};
use super::symbols::{IdHasher, Symbols, WARM_GROUP};
use super::{
    ApprovalState, ApprovalStatus, ErrorEntry, ErrorSource, PlanStep, RetryState, RunState,
    RunStatus, StepState, StepStatus, ToolCallState, ToolCallStatus, UnknownEvent,
};
use crate::event::{Decision, EventKind, PauseReason, Risk, RunEvent};
use crate::opaque::Json;

/// Events [`Deriver::push_all`] folds before it sizes the call list from their share of tool
/// calls.
const CALL_SAMPLE: usize = 4096;

/// What [`Deriver::push`] did with an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Applied {
    /// Folded into the state.
    Folded,
    /// Folded, but its `seq` was below the latest folded one.
    Late,
    /// An id already folded: skipped.
    Duplicate,
    /// An event of another run: skipped.
    OtherRun,
}
/// Incremental derivation: the state after each pushed event equals [`derive_run_state`] of the
/// events pushed so far. Each push costs the same whatever the stream length: event ids and the
/// step, call and approval keys are interned in arenas (one string table kind), and a key's
/// entry says where its step, call and approval are; no re-scan, no string allocated per lookup.
#[derive(Debug, Clone, Default)]
pub struct Deriver {
    state: RunState,
    /// Ids of the events folded (the deduplication key).
    events: Symbols,
    /// Step, call and approval keys; `roles[symbol]` says where each is in the state.
    keys: Symbols,
    roles: Vec<SymRoles>,
}

/// Whether [`Deriver::push_view`] checks the event's id against the ids folded.
#[derive(Debug, Clone, Copy)]
pub(crate) enum IdCheck {
    /// Check it (with its hash when already computed).
    Check(Option<u64>),
    /// Recorded as new by [`Deriver::record_id`] already.
    Recorded,
}

/// Where a key is in the state, in each of the key spaces (they are separate: a step and a call
/// may share an id).
#[derive(Debug, Clone, Copy)]
struct SymRoles {
    step: u32,
    call: u32,
    approval: u32,
}

const NONE: u32 = u32::MAX;

impl Default for SymRoles {
    fn default() -> Self {
        SymRoles {
            step: NONE,
            call: NONE,
            approval: NONE,
        }
    }
}

fn error_parts(error: Option<&Value>) -> (String, Option<String>) {
    match error {
        Some(Value::String(s)) => (s.clone(), None),
        Some(Value::Object(map)) => (
            map.get("message")
                .and_then(Value::as_str)
                .unwrap_or_default()
                .to_owned(),
            map.get("code").and_then(Value::as_str).map(str::to_owned),
        ),
        Some(other) => (other.to_string(), None),
        None => (String::new(), None),
    }
}

/// The `error` field of an event: kept opaque, with its message and code.
fn error_of(event: &impl EventView) -> (Option<Json>, String, Option<String>) {
    if let Some(message) = event.str_field(Key::Error) {
        let message = message.into_owned();
        let json = event.json_field(Key::Error);
        return (json, message, None);
    }
    event.with_value(Key::Error, |v| {
        let (message, code) = error_parts(v);
        (v.map(Json::from_value), message, code)
    })
}

impl Deriver {
    /// An empty deriver.
    pub fn new() -> Self {
        Deriver::default()
    }

    /// The state so far.
    pub fn state(&self) -> &RunState {
        &self.state
    }

    /// The state, consuming the deriver.
    pub fn into_state(self) -> RunState {
        self.state
    }

    /// The symbol of the key `id` (its entry in `roles`), interning it when new.
    fn key(&mut self, id: &str) -> usize {
        let (symbol, new) = self.keys.intern(id, None);
        if new {
            self.roles.push(SymRoles::default());
        }
        symbol
    }

    /// Makes room for about `events` more events whose ids take `id_bytes` bytes in all, so a
    /// long stream does not grow the id set step by step.
    pub fn reserve(&mut self, events: usize, id_bytes: usize) {
        self.events.reserve(events, id_bytes);
        // Keys (steps, calls, approvals) are fewer than events; a quarter is a common ratio.
        self.keys.reserve(events / 4, id_bytes / 4);
        self.roles.reserve(events / 4);
    }

    /// Makes room for about `calls` more tool calls, so a long run's call list is not copied
    /// each time it doubles (each copy touches fresh memory for the whole list).
    pub fn reserve_tool_calls(&mut self, calls: usize) {
        self.state.tool_calls.reserve(calls);
    }

    /// Folds every event of `events`.
    ///
    /// Events are taken a few at a time: their ids are hashed and the id set's lines for them
    /// loaded together before any is folded, so a long stream's id lookups do not each wait for
    /// memory in turn.
    pub fn push_all<'a>(&mut self, events: impl IntoIterator<Item = &'a RunEvent>) {
        self.push_grouped(events);
    }

    /// [`Deriver::push_all`] of events the caller gives away or lends.
    fn push_grouped<E: std::borrow::Borrow<RunEvent>>(
        &mut self,
        events: impl IntoIterator<Item = E>,
    ) {
        let mut events = events.into_iter();
        let mut group = Vec::with_capacity(WARM_GROUP);
        let mut sampled = false;
        let mut pushed = 0usize;
        let calls_before = self.state.tool_calls.len();
        loop {
            if !sampled && pushed >= CALL_SAMPLE {
                sampled = true;
                let calls = self.state.tool_calls.len() - calls_before;
                self.size_call_list(calls, pushed, events.size_hint().0);
            }
            pushed += WARM_GROUP;
            let hasher = &self.events.hasher;
            group.extend(events.by_ref().take(WARM_GROUP).map(|event| {
                let hash = hasher.hash_one(event.borrow().id.as_bytes());
                (event, hash)
            }));
            let full = group.len() == WARM_GROUP;
            self.events.warm(group.iter().map(|&(_, hash)| hash));
            warm_payloads(group.iter().map(|(event, _)| event.borrow()));
            for (event, hash) in group.drain(..) {
                let event = event.borrow();
                self.push_view(event, event.kind(), IdCheck::Check(Some(hash)));
            }
            if !full {
                return;
            }
        }
    }

    /// Sizes the call list for `more` events from the share of tool calls among `seen` events
    /// that made `calls` of them (as the streamed path does from its first piece): a long run's
    /// list would otherwise be copied into fresh memory at every doubling.
    fn size_call_list(&mut self, calls: usize, seen: usize, more: usize) {
        let estimate = more.saturating_mul(calls) / seen.max(1);
        self.state.tool_calls.reserve(estimate + estimate / 16);
    }

    fn step_index(&mut self, id: &str) -> usize {
        let key = self.key(id);
        let roles = &mut self.roles[key];
        if roles.step != NONE {
            return roles.step as usize;
        }
        let i = self.state.steps.len();
        roles.step = i as u32;
        self.state.steps.push(StepState {
            id: id.to_owned(),
            ..StepState::default()
        });
        self.state.steps_left += 1;
        i
    }

    fn set_step_status(&mut self, i: usize, status: StepStatus) {
        let step = &mut self.state.steps[i];
        match (step.status == StepStatus::Done, status == StepStatus::Done) {
            (false, true) => self.state.steps_left -= 1,
            (true, false) => self.state.steps_left += 1,
            _ => {}
        }
        step.status = status;
    }

    fn wake(&mut self) {
        if matches!(self.state.status, RunStatus::Idle | RunStatus::Paused) {
            self.state.status = RunStatus::Running;
            self.state.paused_reason = None;
        }
    }

    /// Folds one event it owns; the same as [`Deriver::push`] (opaque values are kept as their
    /// text either way).
    pub fn push_owned(&mut self, event: RunEvent) -> Applied {
        self.push(&event)
    }

    /// Folds one event.
    pub fn push(&mut self, event: &RunEvent) -> Applied {
        let hash = self.events.hasher.hash_one(event.id.as_bytes());
        self.events.warm([hash]);
        warm_payloads(std::iter::once(event));
        self.push_view(event, event.kind(), IdCheck::Check(Some(hash)))
    }

    /// Records an event id ahead of its push (whose check is then [`IdCheck::Recorded`]); `false`
    /// when the id was folded or recorded already. `hash` is its hash by [`Deriver::id_hasher`].
    pub(crate) fn record_id(&mut self, id: &str, hash: u64) -> bool {
        self.events.intern(id, Some(hash)).1
    }

    /// The hasher of event ids, for a reader that hashes ids ahead of [`Deriver::push_view`].
    pub(crate) fn id_hasher(&self) -> IdHasher {
        IdHasher(self.events.hasher.clone())
    }

    /// Folds one event of known type `kind` (`None` for an unknown type or a newer major
    /// version); `id` says whether its id is still to be checked against the ids folded.
    pub(crate) fn push_view(
        &mut self,
        event: &impl EventView,
        kind: Option<EventKind>,
        id: IdCheck,
    ) -> Applied {
        if let Some(run) = &self.state.run_id
            && run != event.run_id()
        {
            self.state.other_run_events += 1;
            return Applied::OtherRun;
        }
        if let IdCheck::Check(hash) = id
            && !self.events.intern(event.id(), hash).1
        {
            return Applied::Duplicate;
        }
        let state = &mut self.state;
        if state.run_id.is_none() {
            state.run_id = Some(event.run_id().to_owned());
        }
        let seq = event.seq();
        let late = state.last_seq.is_some_and(|last| seq < last);
        if late {
            state.late_events += 1;
        }
        state.last_seq = Some(state.last_seq.map_or(seq, |s| s.max(seq)));
        state.event_count += 1;
        state.updated_at = Some(event.at());
        match kind {
            Some(kind) => self.fold(event, kind),
            None => {
                let raw = event.raw();
                let text = |k: &str| raw.get(k).and_then(Value::as_str).unwrap_or_default();
                let unknown = UnknownEvent {
                    event_id: event.id().to_owned(),
                    seq,
                    event_type: text("type").to_owned(),
                    schema_version: raw
                        .get("schemaVersion")
                        .and_then(crate::event::json_u64)
                        .unwrap_or(0),
                    raw,
                };
                self.state.unknown.push(unknown);
            }
        }
        if late { Applied::Late } else { Applied::Folded }
    }

    fn fold(&mut self, event: &impl EventView, kind: EventKind) {
        let at = event.at();
        let seq = event.seq();
        match kind {
            EventKind::RunStart => {
                let state = &mut self.state;
                state.goal = event.string_field(Key::Goal).or(state.goal.take());
                state.agent = event.string_field(Key::Agent).or(state.agent.take());
                state.started_at = Some(at);
                state.status = RunStatus::Running;
                state.paused_reason = None;
            }
            EventKind::RunDone => {
                let state = &mut self.state;
                state.status = RunStatus::Done;
                state.paused_reason = None;
                state.ended_at = Some(at);
                state.output = event.json_field(Key::Output);
                state.summary = event.string_field(Key::Summary);
            }
            EventKind::RunError => {
                let (_, message, code) = error_of(event);
                let state = &mut self.state;
                state.status = RunStatus::Error;
                state.paused_reason = None;
                state.ended_at = Some(at);
                state.errors.push(ErrorEntry {
                    source: ErrorSource::Run,
                    event_id: event.id().to_owned(),
                    seq,
                    step_id: event.string_field(Key::StepId),
                    call_id: None,
                    message,
                    code,
                    retryable: None,
                });
            }
            EventKind::RunPaused => {
                let state = &mut self.state;
                state.status = RunStatus::Paused;
                state.paused_reason = event
                    .str_field(Key::Reason)
                    .and_then(|r| PauseReason::from_wire(&r));
            }
            EventKind::Plan => {
                let plan = event.with_value(Key::Steps, |steps| {
                    let mut plan = Vec::new();
                    if let Some(Value::Array(steps)) = steps {
                        for step in steps {
                            let text =
                                |k: &str| step.get(k).and_then(Value::as_str).unwrap_or_default();
                            plan.push(PlanStep {
                                id: text("id").to_owned(),
                                title: text("title").to_owned(),
                            });
                        }
                    }
                    plan
                });
                for step in &plan {
                    let i = self.step_index(&step.id);
                    let s = &mut self.state.steps[i];
                    s.planned = true;
                    s.title = Some(step.title.clone());
                }
                self.state.plan = plan;
            }
            EventKind::StepStart => {
                self.wake();
                let i = self.step_index(&event.str_field(Key::StepId).unwrap_or_default());
                self.set_step_status(i, StepStatus::Running);
                let s = &mut self.state.steps[i];
                if let Some(title) = event.str_field(Key::Title) {
                    set_text(&mut s.title, &title);
                }
                s.attempts += 1;
                s.started_at = Some(at);
                s.ended_at = None;
                // A new attempt: the failure of the previous one stays in `errors`.
                s.error = None;
                s.retryable = None;
            }
            EventKind::StepProgress => {
                self.wake();
                let i = self.step_index(&event.str_field(Key::StepId).unwrap_or_default());
                let s = &mut self.state.steps[i];
                if let Some(progress) = event.f64_field(Key::Progress) {
                    s.progress = Some(progress);
                }
                if let Some(message) = event.str_field(Key::Message) {
                    set_text(&mut s.message, &message);
                }
            }
            EventKind::StepDone => {
                self.wake();
                let i = self.step_index(&event.str_field(Key::StepId).unwrap_or_default());
                self.set_step_status(i, StepStatus::Done);
                let s = &mut self.state.steps[i];
                s.ended_at = Some(at);
                s.output = event.json_field(Key::Output);
            }
            EventKind::StepError => {
                let step_id = event.string_field(Key::StepId).unwrap_or_default();
                let i = self.step_index(&step_id);
                self.set_step_status(i, StepStatus::Error);
                let retryable = event.bool_field(Key::Retryable);
                let (error, message, code) = error_of(event);
                let s = &mut self.state.steps[i];
                s.ended_at = Some(at);
                s.error = error;
                s.retryable = retryable;
                self.state.errors.push(ErrorEntry {
                    source: ErrorSource::Step,
                    event_id: event.id().to_owned(),
                    seq,
                    step_id: Some(step_id),
                    call_id: None,
                    message,
                    code,
                    retryable,
                });
            }
            EventKind::ToolCall => {
                self.wake();
                let key = event
                    .str_field(Key::CallId)
                    .unwrap_or(Cow::Borrowed(event.id()))
                    .into_owned();
                let step_id = event.string_field(Key::StepId);
                if let Some(step) = &step_id {
                    let i = self.step_index(step);
                    self.state.steps[i].tool_calls.push(key.clone());
                }
                self.state.totals.tool_calls += 1;
                let symbol = self.key(&key);
                self.roles[symbol].call = self.state.tool_calls.len() as u32;
                grow_call_list(&mut self.state.tool_calls);
                self.state.tool_calls.push(ToolCallState {
                    call_id: key,
                    event_id: event.id().to_owned(),
                    step_id,
                    name: event.string_field(Key::Name),
                    args: event.json_field(Key::Args),
                    seq,
                    called_at: Some(at),
                    ..ToolCallState::default()
                });
            }
            EventKind::ToolResult => {
                let key = event.str_field(Key::CallId).unwrap_or_default();
                let symbol = self.key(&key);
                let slot = &mut self.roles[symbol].call;
                let i = place(slot, &mut self.state.tool_calls, || ToolCallState {
                    call_id: key.to_string(),
                    event_id: event.id().to_owned(),
                    step_id: event.string_field(Key::StepId),
                    seq,
                    ..ToolCallState::default()
                });
                let ok = event.bool_field(Key::Ok).unwrap_or(false);
                let ms = event.number_field(Key::Ms);
                let tokens = event.u64_field(Key::Tokens);
                let cost = event.number_field(Key::Cost);
                let totals = &mut self.state.totals;
                totals.ms += ms.as_ref().and_then(Number::as_f64).unwrap_or(0.0);
                totals.tokens = totals.tokens.saturating_add(tokens.unwrap_or(0));
                totals.cost += cost.as_ref().and_then(Number::as_f64).unwrap_or(0.0);
                if !ok {
                    totals.failed_tool_calls += 1;
                }
                let (error, message, code) = if ok && event.with_value(Key::Error, |e| e.is_none())
                {
                    (None, String::new(), None)
                } else {
                    error_of(event)
                };
                let call = &mut self.state.tool_calls[i];
                call.status = if ok {
                    ToolCallStatus::Ok
                } else {
                    ToolCallStatus::Error
                };
                call.result = event.json_field(Key::Result);
                call.error = error;
                call.ms = ms;
                call.tokens = tokens;
                call.cost = cost;
                call.finished_at = Some(at);
                call.result_event_id = Some(event.id().to_owned());
                if !ok {
                    let step_id = call.step_id.clone();
                    self.state.errors.push(ErrorEntry {
                        source: ErrorSource::Tool,
                        event_id: event.id().to_owned(),
                        seq,
                        step_id,
                        call_id: Some(key.into_owned()),
                        message,
                        code,
                        retryable: None,
                    });
                }
            }
            EventKind::ApprovalRequest => {
                let key = event
                    .str_field(Key::ApprovalId)
                    .unwrap_or(Cow::Borrowed(event.id()))
                    .into_owned();
                let step_id = event.string_field(Key::StepId);
                let risk = event.str_field(Key::Risk).and_then(|r| Risk::from_wire(&r));
                let request = ApprovalState {
                    approval_id: key.clone(),
                    event_id: event.id().to_owned(),
                    step_id: step_id.clone(),
                    summary: event.string_field(Key::Summary),
                    risk,
                    risk_weight: risk.map_or(0, Risk::weight),
                    preview: event.json_field(Key::Preview),
                    call_id: event.string_field(Key::CallId),
                    requested_at: Some(at),
                    ..ApprovalState::default()
                };
                // A repeated request for an approval still pending updates it; after a decision
                // it opens a new round.
                let symbol = self.key(&key);
                let existing = self.roles[symbol].approval;
                if existing != NONE
                    && self.state.approvals[existing as usize].status == ApprovalStatus::Pending
                {
                    self.state.approvals[existing as usize] = request;
                    return;
                }
                if let Some(step) = &step_id {
                    let i = self.step_index(step);
                    self.state.steps[i].approvals.push(key.clone());
                }
                self.roles[symbol].approval = self.state.approvals.len() as u32;
                self.state.pending_approvals += 1;
                self.state.approvals.push(request);
            }
            EventKind::ApprovalDecision => {
                let key = event.str_field(Key::ApprovalId).unwrap_or_default();
                let decision = event
                    .str_field(Key::Decision)
                    .and_then(|d| Decision::from_wire(&d));
                let symbol = self.key(&key);
                let slot = &mut self.roles[symbol].approval;
                let before = self.state.approvals.len();
                let i = place(slot, &mut self.state.approvals, || ApprovalState {
                    approval_id: key.to_string(),
                    event_id: event.id().to_owned(),
                    ..ApprovalState::default()
                });
                if self.state.approvals.len() > before {
                    // A decision without a request opens a pending approval that it then decides.
                    self.state.pending_approvals += 1;
                }
                let a = &mut self.state.approvals[i];
                if a.status == ApprovalStatus::Pending {
                    self.state.pending_approvals -= 1;
                }
                a.status = match decision {
                    Some(Decision::Approve) => ApprovalStatus::Approved,
                    Some(Decision::Edit) => ApprovalStatus::Edited,
                    Some(Decision::Reject) => ApprovalStatus::Rejected,
                    None => ApprovalStatus::Pending,
                };
                if a.status == ApprovalStatus::Pending {
                    self.state.pending_approvals += 1;
                }
                a.decision = decision;
                a.by = event.string_field(Key::By);
                a.comment = event.string_field(Key::Comment);
                a.edited = event.json_field(Key::Edited);
                a.decided_at = Some(at);
                if self.state.status == RunStatus::Paused
                    && self.state.paused_reason == Some(PauseReason::Approval)
                    && self.state.pending_approvals == 0
                {
                    self.wake();
                }
            }
            EventKind::RetryRequest => {
                let step_id = event.string_field(Key::StepId).unwrap_or_default();
                let i = self.step_index(&step_id);
                self.set_step_status(i, StepStatus::Pending);
                self.state.steps[i].retries += 1;
                self.state.retries.push(RetryState {
                    event_id: event.id().to_owned(),
                    step_id,
                    from_event_id: event.string_field(Key::FromEventId).unwrap_or_default(),
                    reason: event.string_field(Key::Reason),
                    attempt: event.u64_field(Key::Attempt),
                    seq,
                });
            }
        }
    }
}

/// Reads the payload members of events (the first byte of each key and string value, and of
/// the keys and strings of object values) all at once: the loads are independent, so their cache
/// misses overlap, and the fold's field scans and the opaque values it writes then find the
/// members cached instead of each waiting for memory in turn.
fn warm_payloads<'e>(events: impl Iterator<Item = &'e RunEvent>) {
    let mut bytes = 0usize;
    for event in events {
        for (key, value) in &event.payload {
            bytes = bytes.wrapping_add(first_byte(key));
            match value {
                Value::String(s) => bytes = bytes.wrapping_add(first_byte(s)),
                Value::Object(map) => {
                    for (key, value) in map {
                        bytes = bytes.wrapping_add(first_byte(key));
                        if let Value::String(s) = value {
                            bytes = bytes.wrapping_add(first_byte(s));
                        }
                    }
                }
                _ => {}
            }
        }
    }
    std::hint::black_box(bytes);
}

/// The first byte of a string (0 when empty), read for [`warm_payloads`].
fn first_byte(s: &str) -> usize {
    s.as_bytes().first().map_or(0, |&b| b as usize)
}

/// Calls from which a full call list grows fourfold instead of doubling.
const CALL_LIST_QUADRUPLES: usize = 4096;

/// Makes room for one more call. A long list that is full grows fourfold rather than doubling:
/// each growth copies the whole list into fresh memory, and over a long run fourfold growth
/// copies about a third as much (the capacity not yet written is address space, which the system
/// backs with memory only as calls are written).
fn grow_call_list(calls: &mut Vec<ToolCallState>) {
    if calls.len() == calls.capacity() && calls.len() >= CALL_LIST_QUADRUPLES {
        calls.reserve_exact(calls.len() * 3);
    }
}

/// The index a symbol's role points at, or a new entry made by `make` when it has none.
fn place<T>(slot: &mut u32, list: &mut Vec<T>, make: impl FnOnce() -> T) -> usize {
    if *slot != NONE {
        return *slot as usize;
    }
    *slot = list.len() as u32;
    list.push(make());
    list.len() - 1
}

/// Sets a text field, reusing its buffer (progress messages repeat on every step).
fn set_text(slot: &mut Option<String>, text: &str) {
    match slot {
        Some(s) if s == text => {}
        Some(s) => {
            s.clear();
            s.push_str(text);
        }
        None => *slot = Some(text.to_owned()),
    }
}

/// Derives the state of the run of the first event from `events` as given (normalize first
/// with [`crate::normalize`] when they may be out of order). Repeated ids are folded once.
pub fn derive_run_state<'a>(events: impl IntoIterator<Item = &'a RunEvent>) -> RunState {
    let mut deriver = Deriver::new();
    deriver.push_all(events);
    deriver.into_state()
}

/// [`derive_run_state`] of events the caller gives away.
pub fn derive_run_state_owned(events: impl IntoIterator<Item = RunEvent>) -> RunState {
    let mut deriver = Deriver::new();
    deriver.push_grouped(events);
    deriver.into_state()
}

#[cfg(test)]
mod tests {
    use super::super::symbols::WARM_MIN_SLOTS;
    use super::*;

    #[test]
    fn grouped_pushes_fold_what_single_pushes_fold() {
        // Enough ids that the id set is warmed (past `WARM_MIN_SLOTS`), with repeats inside a
        // group and across groups.
        let mut events = Vec::new();
        for i in 0..40_000u64 {
            let id = match i % 10 {
                3 => format!("e{}", i - 1),
                7 => format!("e{}", i / 2),
                _ => format!("e{i}"),
            };
            let payload = serde_json::json!({"stepId": format!("s{}", i % 7), "progress": 0.5});
            let mut event = crate::create_mock_event("r", i + 1, i, "step:progress", payload);
            event.id = id;
            events.push(event);
        }
        let mut single = Deriver::new();
        let applied: Vec<Applied> = events.iter().map(|e| single.push(e)).collect();
        assert!(applied.contains(&Applied::Duplicate));
        assert!(single.events.slots.len() >= WARM_MIN_SLOTS);
        let grouped = derive_run_state(&events);
        assert_eq!(grouped, *single.state());
        assert_eq!(derive_run_state_owned(events), grouped);
    }
}
