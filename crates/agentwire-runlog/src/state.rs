//! Run state derivation: everything a run panel shows, folded from the event stream, in full
//! ([`derive_run_state`]) or incrementally ([`Deriver`], constant work per event).

use std::borrow::Cow;

use serde::Serialize;
use serde_json::{Map, Number, Value};

use crate::event::{Decision, EventKind, PauseReason, Risk, RunEvent};
use crate::opaque::Json;

/// Lifecycle of a run.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    /// No event of the run yet.
    #[default]
    Idle,
    /// Started, or something happens in it.
    Running,
    /// Waiting for an approval or for the user (`pausedReason`).
    Paused,
    /// Finished.
    Done,
    /// Failed and stopped.
    Error,
}

/// Status of a step.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum StepStatus {
    /// Planned, or waiting to be retried.
    #[default]
    Pending,
    /// Started and not finished.
    Running,
    /// Finished.
    Done,
    /// Failed.
    Error,
}

/// Status of a tool call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ToolCallStatus {
    /// No result yet.
    #[default]
    Pending,
    /// The result says `ok: true`.
    Ok,
    /// The result says `ok: false`.
    Error,
}

/// Status of an approval.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ApprovalStatus {
    /// Waiting for a decision.
    #[default]
    Pending,
    /// Approved as proposed.
    Approved,
    /// Approved with edits.
    Edited,
    /// Rejected.
    Rejected,
}

/// A step of the plan as declared.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct PlanStep {
    /// Step id.
    pub id: String,
    /// Title shown to people.
    pub title: String,
}

/// A step: from the plan, or first seen in a step or tool event.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct StepState {
    /// Step id.
    pub id: String,
    /// Title from the plan or from `step:start`.
    pub title: Option<String>,
    /// Whether the plan declares the step.
    pub planned: bool,
    /// Where the step is.
    pub status: StepStatus,
    /// How many times it started.
    pub attempts: u32,
    /// `at` of the latest start.
    pub started_at: Option<u64>,
    /// `at` of the latest finish or failure.
    pub ended_at: Option<u64>,
    /// Latest progress fraction.
    pub progress: Option<f64>,
    /// Latest progress message.
    pub message: Option<String>,
    /// Output of `step:done`, opaque.
    pub output: Option<Json>,
    /// Error of the latest `step:error`.
    pub error: Option<Json>,
    /// Whether the latest failure may be retried.
    pub retryable: Option<bool>,
    /// Keys of the tool calls made in the step, in order.
    pub tool_calls: Vec<String>,
    /// Keys of the approvals requested in the step, in order.
    pub approvals: Vec<String>,
    /// How many retries were requested.
    pub retries: u32,
}

/// A tool call paired with its result.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ToolCallState {
    /// The call's key: its `callId`, or its event id when it has none.
    pub call_id: String,
    /// Id of the `tool:call` event (of the `tool:result` for a result without a call).
    pub event_id: String,
    /// Step of the call.
    pub step_id: Option<String>,
    /// Tool name (absent only for a result whose call was never seen).
    pub name: Option<String>,
    /// Arguments, opaque.
    pub args: Option<Json>,
    /// Where the call is.
    pub status: ToolCallStatus,
    /// Result, opaque.
    pub result: Option<Json>,
    /// Error of a failed call.
    pub error: Option<Json>,
    /// Duration in milliseconds, as written.
    pub ms: Option<Number>,
    /// Tokens spent.
    pub tokens: Option<u64>,
    /// Cost in US dollars, as written.
    pub cost: Option<Number>,
    /// `seq` of the call event.
    pub seq: u64,
    /// `at` of the call.
    pub called_at: Option<u64>,
    /// `at` of the result.
    pub finished_at: Option<u64>,
    /// Id of the `tool:result` event.
    pub result_event_id: Option<String>,
}

/// An approval request and its decision.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ApprovalState {
    /// The request's key: its `approvalId`, or its event id when it has none.
    pub approval_id: String,
    /// Id of the request event (of the decision for a decision without a request).
    pub event_id: String,
    /// Step that waits.
    pub step_id: Option<String>,
    /// What is to be approved.
    pub summary: Option<String>,
    /// Risk level.
    pub risk: Option<Risk>,
    /// Weight of the risk ([`crate::RISK_WEIGHT`]); 0 when unknown.
    pub risk_weight: u8,
    /// Structured preview, opaque.
    pub preview: Option<Json>,
    /// Tool call awaiting the approval.
    pub call_id: Option<String>,
    /// Where the approval is.
    pub status: ApprovalStatus,
    /// The decision, once made.
    pub decision: Option<Decision>,
    /// Who decided.
    pub by: Option<String>,
    /// Why.
    pub comment: Option<String>,
    /// The edited proposal of an `edit` decision.
    pub edited: Option<Json>,
    /// `at` of the request.
    pub requested_at: Option<u64>,
    /// `at` of the decision.
    pub decided_at: Option<u64>,
}

/// A retry, anchored to the event it restarts from.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RetryState {
    /// Id of the `retry:request` event.
    pub event_id: String,
    /// Step retried.
    pub step_id: String,
    /// The anchor.
    pub from_event_id: String,
    /// Why.
    pub reason: Option<String>,
    /// Attempt number, when given.
    pub attempt: Option<u64>,
    /// `seq` of the request.
    pub seq: u64,
}

/// Where an error came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
pub enum ErrorSource {
    /// `run:error`.
    Run,
    /// `step:error`.
    Step,
    /// A `tool:result` with `ok: false`.
    Tool,
}

/// An error of the run, a step or a tool call.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ErrorEntry {
    /// Where it came from.
    pub source: ErrorSource,
    /// Id of the event that reported it.
    pub event_id: String,
    /// `seq` of that event.
    pub seq: u64,
    /// Step concerned.
    pub step_id: Option<String>,
    /// Tool call concerned.
    pub call_id: Option<String>,
    /// The message (the error text, or its `message`).
    pub message: String,
    /// The error's `code`, when it has one.
    pub code: Option<String>,
    /// Whether a retry may help (step errors).
    pub retryable: Option<bool>,
}

/// An event of an unknown type or of a newer major version, folded with its raw JSON.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct UnknownEvent {
    /// Event id.
    pub event_id: String,
    /// Its `seq`.
    pub seq: u64,
    /// Its type.
    #[serde(rename = "type")]
    pub event_type: String,
    /// Its `schemaVersion`.
    pub schema_version: u64,
    /// The whole event.
    pub raw: Value,
}

/// Sums over the tool results.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    /// Tool calls seen.
    pub tool_calls: u64,
    /// Tool results with `ok: false`.
    pub failed_tool_calls: u64,
    /// Tokens.
    pub tokens: u64,
    /// Cost in US dollars.
    pub cost: f64,
    /// Milliseconds spent in tools.
    pub ms: f64,
}

/// Everything a run panel shows, derived from the run's events.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct RunState {
    /// The run (of the first event folded).
    pub run_id: Option<String>,
    /// The goal of `run:start`.
    pub goal: Option<String>,
    /// The agent of `run:start`.
    pub agent: Option<String>,
    /// Lifecycle.
    pub status: RunStatus,
    /// Why the run is paused, while it is.
    pub paused_reason: Option<PauseReason>,
    /// `at` of `run:start` (display only).
    pub started_at: Option<u64>,
    /// `at` of `run:done` or `run:error` (display only).
    pub ended_at: Option<u64>,
    /// `at` of the latest event (display only).
    pub updated_at: Option<u64>,
    /// Highest `seq` folded.
    pub last_seq: Option<u64>,
    /// Events folded (duplicates and other runs' events excluded).
    pub event_count: u64,
    /// The plan as declared by the latest `plan`.
    pub plan: Vec<PlanStep>,
    /// Steps: planned ones in plan order, then the others as they appear.
    pub steps: Vec<StepState>,
    /// Steps not done yet.
    pub steps_left: u64,
    /// Tool calls in call order.
    pub tool_calls: Vec<ToolCallState>,
    /// Approvals in request order.
    pub approvals: Vec<ApprovalState>,
    /// Approvals waiting for a decision.
    pub pending_approvals: u64,
    /// Retries in order.
    pub retries: Vec<RetryState>,
    /// Errors in order.
    pub errors: Vec<ErrorEntry>,
    /// Unknown events, folded.
    pub unknown: Vec<UnknownEvent>,
    /// Output of `run:done`.
    pub output: Option<Json>,
    /// Summary of `run:done`.
    pub summary: Option<String>,
    /// Sums over tool results.
    pub totals: Totals,
    /// Events of other runs that were skipped.
    pub other_run_events: u64,
    /// Events whose `seq` was below one already folded (folded on arrival; normalize first to
    /// fold them in order).
    pub late_events: u64,
}

impl RunState {
    /// The step with this id.
    pub fn step(&self, id: &str) -> Option<&StepState> {
        self.steps.iter().find(|s| s.id == id)
    }

    /// Whether an approval waits for a decision (in the step `step_id`, or anywhere with `None`).
    pub fn has_pending_approval(&self, step_id: Option<&str>) -> bool {
        has_pending_approval(self, step_id)
    }
}

/// Whether an approval waits for a decision, in step `step_id` or (with `None`) anywhere.
pub fn has_pending_approval(state: &RunState, step_id: Option<&str>) -> bool {
    state.approvals.iter().any(|a| {
        a.status == ApprovalStatus::Pending
            && step_id.is_none_or(|s| a.step_id.as_deref() == Some(s))
    })
}

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

macro_rules! payload_names {
    ($($variant:ident => $wire:literal,)*) => {
        /// A payload field the fold reads, named once (a line's fields are found by it without
        /// comparing names).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Key {
            $($variant,)*
        }

        impl Key {
            /// How many names there are.
            pub(crate) const COUNT: usize = [$($wire,)*].len();

            /// The wire name.
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(Key::$variant => $wire,)*
                }
            }

            /// The name of a wire name.
            pub(crate) fn from_wire(name: &str) -> Option<Key> {
                match name {
                    $($wire => Some(Key::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

payload_names! {
    Goal => "goal",
    Agent => "agent",
    Input => "input",
    Output => "output",
    Summary => "summary",
    Error => "error",
    StepId => "stepId",
    Reason => "reason",
    Message => "message",
    Steps => "steps",
    Title => "title",
    Progress => "progress",
    Retryable => "retryable",
    CallId => "callId",
    Name => "name",
    Args => "args",
    Ok => "ok",
    Result => "result",
    Ms => "ms",
    Tokens => "tokens",
    Cost => "cost",
    ApprovalId => "approvalId",
    Risk => "risk",
    Preview => "preview",
    Decision => "decision",
    By => "by",
    Comment => "comment",
    Edited => "edited",
    FromEventId => "fromEventId",
    Attempt => "attempt",
}

/// What the fold reads of an event, whichever form it comes in: a parsed [`RunEvent`] or a line
/// read straight from its text.
pub(crate) trait EventView {
    fn id(&self) -> &str;
    fn run_id(&self) -> &str;
    fn seq(&self) -> u64;
    fn at(&self) -> u64;
    /// A payload string.
    fn str_field(&self, name: Key) -> Option<Cow<'_, str>>;
    /// A payload boolean.
    fn bool_field(&self, name: Key) -> Option<bool>;
    /// A payload number.
    fn number_field(&self, name: Key) -> Option<Number>;
    /// A payload value kept opaque.
    fn json_field(&self, name: Key) -> Option<Json>;
    /// A payload value as a tree (for the few fields the fold looks inside).
    fn with_value<R>(&self, name: Key, f: impl FnOnce(Option<&Value>) -> R) -> R;
    /// The whole event as a value.
    fn raw(&self) -> Value;

    fn f64_field(&self, name: Key) -> Option<f64> {
        self.number_field(name).and_then(|n| n.as_f64())
    }

    fn u64_field(&self, name: Key) -> Option<u64> {
        self.number_field(name).and_then(|n| n.as_u64())
    }

    fn string_field(&self, name: Key) -> Option<String> {
        self.str_field(name).map(Cow::into_owned)
    }
}

/// A payload member; payloads are small, so a scan beats hashing the name.
fn member<'a>(map: &'a Map<String, Value>, name: &str) -> Option<&'a Value> {
    if map.len() <= 12 {
        map.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v)
    } else {
        map.get(name)
    }
}

impl EventView for RunEvent {
    fn id(&self) -> &str {
        &self.id
    }

    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn seq(&self) -> u64 {
        self.seq
    }

    fn at(&self) -> u64 {
        self.at
    }

    fn str_field(&self, name: Key) -> Option<Cow<'_, str>> {
        member(&self.payload, name.as_str())
            .and_then(Value::as_str)
            .map(Cow::Borrowed)
    }

    fn bool_field(&self, name: Key) -> Option<bool> {
        member(&self.payload, name.as_str()).and_then(Value::as_bool)
    }

    fn number_field(&self, name: Key) -> Option<Number> {
        match member(&self.payload, name.as_str()) {
            Some(Value::Number(n)) => Some(n.clone()),
            _ => None,
        }
    }

    fn json_field(&self, name: Key) -> Option<Json> {
        member(&self.payload, name.as_str()).map(Json::from_value)
    }

    fn with_value<R>(&self, name: Key, f: impl FnOnce(Option<&Value>) -> R) -> R {
        f(member(&self.payload, name.as_str()))
    }

    fn raw(&self) -> Value {
        self.to_value()
    }
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

/// Hashes event ids the way the deriver's id set does (so another thread can do it).
#[derive(Debug, Clone)]
pub(crate) struct IdHasher(ahash::RandomState);

impl IdHasher {
    pub(crate) fn hash(&self, id: &str) -> u64 {
        self.0.hash_one(id.as_bytes())
    }
}

/// Strings interned in one arena, each numbered by its arrival (its symbol). The table is open
/// addressing with linear probing, at most half full; a slot holds the top 24 bits of the
/// string's hash and its symbol, so a lookup touches one cache line of the table and reads the
/// arena only when the 24 bits match. About `len + 24` bytes per string and no allocation per
/// string: a long stream's dedup costs one random memory access per new id.
#[derive(Clone, Default)]
struct Symbols {
    arena: Vec<u8>,
    /// Where each symbol's text ends in the arena (it starts where the previous one ends).
    ends: Vec<usize>,
    /// 0: empty; else `tag << SYMBOL_BITS | (symbol + 1)`.
    slots: Vec<u64>,
    hasher: ahash::RandomState,
}

/// Bits of a slot that hold the symbol (2^40 strings: more than any memory holds).
const SYMBOL_BITS: u32 = 40;
const SYMBOL_MASK: u64 = (1 << SYMBOL_BITS) - 1;
/// Tables of fewer slots (512 KiB) stay in a core's own cache; [`Symbols::warm`] skips them.
const WARM_MIN_SLOTS: usize = 1 << 16;
/// Events whose ids are looked up together (see [`Symbols::warm`]).
const WARM_GROUP: usize = 16;

impl std::fmt::Debug for Symbols {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Symbols")
            .field("len", &self.ends.len())
            .finish()
    }
}

impl Symbols {
    fn len(&self) -> usize {
        self.ends.len()
    }

    fn text(&self, symbol: usize) -> &[u8] {
        let start = symbol.checked_sub(1).map_or(0, |prev| self.ends[prev]);
        &self.arena[start..self.ends[symbol]]
    }

    /// The symbol of `text` (whose hash by `self.hasher` is `hash`, when known), and whether it
    /// is new (then interned now).
    fn intern(&mut self, text: &str, hash: Option<u64>) -> (usize, bool) {
        let hash = hash.unwrap_or_else(|| self.hasher.hash_one(text.as_bytes()));
        if (self.len() + 1) * 2 > self.slots.len() {
            self.grow(((self.len() + 1) * 2).next_power_of_two().max(64));
        }
        let mask = self.slots.len() - 1;
        let tag = hash >> SYMBOL_BITS;
        let mut i = hash as usize & mask;
        loop {
            let slot = self.slots[i];
            if slot == 0 {
                break;
            }
            let symbol = ((slot & SYMBOL_MASK) - 1) as usize;
            if slot >> SYMBOL_BITS == tag && self.text(symbol) == text.as_bytes() {
                return (symbol, false);
            }
            i = (i + 1) & mask;
        }
        let symbol = self.len();
        self.arena.extend_from_slice(text.as_bytes());
        self.ends.push(self.arena.len());
        self.slots[i] = tag << SYMBOL_BITS | (symbol as u64 + 1);
        (symbol, true)
    }

    /// Loads the table lines that lookups of strings with these hashes will start at, all at
    /// once. The loads are independent, so the core runs them together and their cache misses
    /// overlap instead of each lookup waiting for its own; the lookups that follow find the lines
    /// cached. (It is what a prefetch does, in safe code.) A table that fits in the faster
    /// caches is left alone.
    fn warm(&self, hashes: impl IntoIterator<Item = u64>) {
        if self.slots.len() < WARM_MIN_SLOTS {
            return;
        }
        let mask = self.slots.len() - 1;
        let mut lines = 0u64;
        for hash in hashes {
            lines ^= self.slots[hash as usize & mask];
        }
        std::hint::black_box(lines);
    }

    /// Rebuilds the table with `capacity` slots (a power of two), reading the arena in order.
    fn grow(&mut self, capacity: usize) {
        let mut slots = vec![0u64; capacity];
        let mask = capacity - 1;
        for symbol in 0..self.len() {
            let hash = self.hasher.hash_one(self.text(symbol));
            let mut i = hash as usize & mask;
            while slots[i] != 0 {
                i = (i + 1) & mask;
            }
            slots[i] = (hash >> SYMBOL_BITS) << SYMBOL_BITS | (symbol as u64 + 1);
        }
        self.slots = slots;
    }

    /// Makes room for `more` strings of `bytes` bytes in all.
    fn reserve(&mut self, more: usize, bytes: usize) {
        self.arena.reserve(bytes);
        self.ends.reserve(more);
        let want = (self.len() + more).saturating_mul(2).next_power_of_two();
        if want > self.slots.len() {
            self.grow(want);
        }
    }
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
        loop {
            let hasher = &self.events.hasher;
            group.extend(events.by_ref().take(WARM_GROUP).map(|event| {
                let hash = hasher.hash_one(event.borrow().id.as_bytes());
                (event, hash)
            }));
            let full = group.len() == WARM_GROUP;
            self.events.warm(group.iter().map(|&(_, hash)| hash));
            for (event, hash) in group.drain(..) {
                let event = event.borrow();
                self.push_view(event, event.kind(), IdCheck::Check(Some(hash)));
            }
            if !full {
                return;
            }
        }
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
        self.push_view(event, event.kind(), IdCheck::Check(None))
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
    use super::*;

    #[test]
    fn symbols_remember_every_string_across_growth() {
        let mut set = Symbols::default();
        let ids: Vec<String> = (0..20_000).map(|i| format!("e_{i}")).collect();
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(set.intern(id, None), (n, true), "{id}");
        }
        for (n, id) in ids.iter().enumerate() {
            assert_eq!(set.intern(id, None), (n, false), "{id}");
            assert_eq!(set.text(n), id.as_bytes());
        }
        assert_eq!(set.intern("", None), (20_000, true));
        assert_eq!(set.intern("", None), (20_000, false));
        assert_eq!(set.intern("e_20000", None), (20_001, true));
        assert_eq!(set.len(), 20_002);
        assert!(set.slots.len() >= set.len() * 2);

        // A reserved set, and a hash computed ahead by the same hasher.
        let mut set = Symbols::default();
        set.reserve(1000, 8000);
        let hasher = IdHasher(set.hasher.clone());
        assert_eq!(set.intern("x", Some(hasher.hash("x"))), (0, true));
        assert_eq!(set.intern("x", None), (0, false));
        assert_eq!(set.intern("x", Some(hasher.hash("x"))), (0, false));
    }

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
