//! The lenient coercer for a stream read as it arrives ([`LiveCoercer`]): an agent's output,
//! one line at a time, coerced with what the lines before it say and nothing after.
//!
//! The rules are the whole-log coercer's where they need no look-ahead: the same envelope
//! repairs, the same payload inferences (pairing follows the lines in arrival order), the same
//! verdicts on lines that cannot be repaired. What a whole log decides from all its lines, a
//! live stream decides up front or from the past: the caller names the stream's run (a line
//! without `runId` belongs to it), a line without `seq` is numbered after the line before it,
//! an id is compared only with the ids already seen, and no `run:start` is synthesized (one
//! might still come).

use ahash::{AHashMap as HashMap, RandomState};
use serde_json::Value;

use super::envelope::{Candidate, IdAction, envelope, is_envelope_code, wrap};
use super::payload::{RunTrack, payload};
use super::text::{Body, body_at, body_id, body_value, parse_body};
use super::{Coercer, Issue, IssueLevel, LineItem};

/// Seeds of the two fixed hashers whose outputs form a line's 128-bit fingerprint.
const FINGERPRINT_SEEDS: [[u64; 4]; 2] = [
    [
        0x243F_6A88_85A3_08D3,
        0x1319_8A2E_0370_7344,
        0xA409_3822_299F_31D0,
        0x082E_FA98_EC4E_6C89,
    ],
    [
        0x4528_21E6_38D0_1377,
        0xBE54_66CF_34E9_0C6C,
        0xC0AC_29B7_C97C_50DD,
        0x3F84_D5B5_B547_0917,
    ],
];

/// Coerces a live NDJSON stream line by line (see the module documentation). Memory is one
/// entry per id seen (its first line and a 128-bit fingerprint of that line's value) and the
/// per-run pairing state: a caller reading an unbounded stream bounds the lines it feeds.
pub struct LiveCoercer {
    co: Coercer,
    run_id: String,
    /// Every id seen: the line that first used it and, for an id the line gave itself, the
    /// fingerprint of that line's value (a generated id has none: no later line repeats it).
    ids: HashMap<String, (usize, Option<u128>)>,
    tracks: Vec<(String, RunTrack)>,
    last_at: u64,
    any_at: bool,
    prev_seq: u64,
    any_seq: bool,
    line: usize,
    hashers: [RandomState; 2],
}

impl std::fmt::Debug for LiveCoercer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LiveCoercer")
            .field("run_id", &self.run_id)
            .field("line", &self.line)
            .field("ids", &self.ids.len())
            .finish_non_exhaustive()
    }
}

impl LiveCoercer {
    /// A coercer for a stream whose events belong to `run_id` unless they name another run;
    /// `default_at` is the `at` of events before the first line that has one (the time the
    /// stream began, say).
    pub fn new(run_id: impl Into<String>, default_at: u64) -> LiveCoercer {
        LiveCoercer {
            co: Coercer {
                issues: Vec::new(),
                used_ids: Default::default(),
                next_fresh: 0,
                any_at: false,
                run_from_container: false,
            },
            run_id: run_id.into(),
            ids: HashMap::new(),
            tracks: Vec::new(),
            last_at: default_at,
            any_at: false,
            prev_seq: 0,
            any_seq: false,
            line: 0,
            hashers: FINGERPRINT_SEEDS.map(|[a, b, c, d]| RandomState::with_seeds(a, b, c, d)),
        }
    }

    /// The run of events that name none.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// Lines coerced so far (the 1-based number of the last one).
    pub fn lines(&self) -> usize {
        self.line
    }

    /// Coerces the next line of text (trimmed of its line ending; the caller skips blank lines).
    pub fn push_line(&mut self, bytes: &[u8]) -> (LineItem, Vec<Issue>) {
        let body = parse_body(bytes.trim_ascii());
        self.push_body(body)
    }

    /// Coerces the next line, already parsed (with the strict parser: a caller that looked at
    /// the value before deciding it is a run event).
    pub fn push_value(&mut self, value: Value) -> (LineItem, Vec<Issue>) {
        let body = match value {
            Value::Object(map) => Body::Object(map),
            other => Body::Other(other),
        };
        self.push_body(body)
    }

    fn fingerprint(&self, body: &Body) -> u128 {
        let text = serde_json::to_vec(&body_value(body)).unwrap_or_default();
        let [a, b] = &self.hashers;
        (u128::from(a.hash_one(&text)) << 64) | u128::from(b.hash_one(&text))
    }

    fn push_body(&mut self, body: Body) -> (LineItem, Vec<Issue>) {
        self.line += 1;
        let line = self.line;
        let given_id = body_id(&body).map(str::to_owned);
        let id_action = match &given_id {
            None => IdAction::Keep,
            Some(id) => match self.ids.get(id) {
                None => IdAction::Keep,
                Some(&(first, Some(seen))) if seen == self.fingerprint(&body) => {
                    IdAction::Duplicate(first)
                }
                Some(&(first, _)) => IdAction::Reassign(first),
            },
        };
        if let (Some(id), IdAction::Keep) = (&given_id, id_action) {
            let print = self.fingerprint(&body);
            self.remember(id, line, Some(print));
        }
        let has_at = body_at(&body).is_some();
        self.co.any_at = self.any_at || has_at;
        self.any_at |= has_at;
        let candidate = envelope(
            &mut self.co,
            line,
            body,
            id_action,
            Some(&self.run_id),
            &mut self.last_at,
            self.prev_seq,
        );
        let mut issues = std::mem::take(&mut self.co.issues);
        let item = match candidate {
            Candidate::Dropped(text) => LineItem::Dropped { line, text },
            Candidate::Degraded { wrapper, raw } => {
                // A wrapper's seq places it in the timeline: the next line follows it.
                self.prev_seq = wrapper.seq;
                self.any_seq = true;
                self.remember_generated(&wrapper.id, line);
                LineItem::Degraded { line, wrapper, raw }
            }
            Candidate::Ready {
                mut event,
                raw,
                mut fixes,
            } => {
                if event.seq == u64::MAX {
                    let seq = if self.any_seq { self.prev_seq + 1 } else { 1 };
                    event.seq = seq;
                    fixes.push(Issue {
                        level: IssueLevel::Fixed,
                        line,
                        code: "seq-filled",
                        message: if self.any_seq {
                            format!("seq missing; numbered {seq}, after the line before it")
                        } else {
                            format!("seq missing; numbered {seq}, the first of the stream")
                        },
                    });
                }
                self.prev_seq = event.seq;
                self.any_seq = true;
                self.remember_generated(&event.id, line);
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
                        LineItem::Event(event)
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
                        LineItem::Degraded { line, wrapper, raw }
                    }
                }
            }
            // The envelope pass of a live line never decides validity alone.
            Candidate::Valid(event) => LineItem::Event(event),
        };
        (item, issues)
    }

    /// Records an id the envelope pass generated, so no later fresh id repeats it and a line
    /// that gives it is re-assigned.
    fn remember_generated(&mut self, id: &str, line: usize) {
        if !self.ids.contains_key(id) {
            self.remember(id, line, None);
        }
    }

    /// Records an id as seen. Fresh ids skip every id seen so far (the coercer's set is shared
    /// with nothing else, so it is updated in place).
    fn remember(&mut self, id: &str, line: usize, print: Option<u128>) {
        self.ids.insert(id.to_owned(), (line, print));
        std::sync::Arc::make_mut(&mut self.co.used_ids).insert(id.to_owned());
    }
}
