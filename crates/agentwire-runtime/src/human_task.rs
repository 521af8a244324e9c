//! Durable human tasks as a thread's fold keeps them: a decision people take on an operation
//! before a turn's gated step (its node) runs, with a quorum of accepting actors, optional
//! separation of duties, and a deadline. The rules are the fold's (docs/runtime.md, "Human
//! tasks"): a decision is recorded once, checked on the task as it is, and the task settles at
//! most once — `decided` when the accepting decisions reach the quorum or at the first decline,
//! `cancelled` by a cancel (a host's, a `cancel` decision, the turn's stop or end), `expired` at
//! its deadline. Nothing is recorded on a settled task.

use serde::{Deserialize, Serialize};

use crate::decision::{Decision, DecisionKind};
use crate::event::HumanTask;

/// Human tasks a thread keeps: every open one, and the newest settled ones up to this many in
/// all (the oldest settled task is forgotten first).
pub const MAX_HUMAN_TASKS: usize = 256;

/// Decisions one task records at most (the protocol's bound; a quorum is at most 64).
pub const MAX_HUMAN_TASK_DECISIONS: usize = 64;

/// Where a human task stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum HumanTaskStatus {
    /// Waiting for decisions.
    Open,
    /// Settled by its decisions: the quorum of accepting ones, or a decline.
    Decided,
    /// Settled by a cancel.
    Cancelled,
    /// Settled by its deadline.
    Expired,
}

impl HumanTaskStatus {
    /// Its name on the wire (ChainlessChain's `HumanTask.status`).
    pub fn as_str(self) -> &'static str {
        match self {
            HumanTaskStatus::Open => "open",
            HumanTaskStatus::Decided => "decided",
            HumanTaskStatus::Cancelled => "cancelled",
            HumanTaskStatus::Expired => "expired",
        }
    }
}

/// One actor's recorded decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanTaskDecision {
    /// Who decided.
    pub actor_id: String,
    /// What.
    pub decision: Decision,
    /// When it was recorded.
    pub decided_at_ms: u64,
}

/// A human task: as opened, and what its decisions made of it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct HumanTaskState {
    /// The task as opened (its nonce the current one).
    pub task: HumanTask,
    /// Where it stands.
    pub status: HumanTaskStatus,
    /// The decisions recorded, in order.
    pub decisions: Vec<HumanTaskDecision>,
    /// Why it was cancelled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// When it was opened.
    pub opened_at_ms: u64,
    /// When it last changed.
    pub updated_at_ms: u64,
    /// The log position of its `human_task.opened`.
    pub opened_position: u64,
}

/// Why a decision cannot be recorded on a task as it is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DecisionRefusal {
    /// The task is settled.
    Settled(HumanTaskStatus),
    /// Separation of duties: the actor already decided.
    RepeatActor,
    /// The task holds [`MAX_HUMAN_TASK_DECISIONS`] decisions.
    TooManyDecisions,
}

impl HumanTaskState {
    /// Whether it still takes decisions.
    pub fn is_open(&self) -> bool {
        self.status == HumanTaskStatus::Open
    }

    /// The accepting decisions recorded.
    pub fn accepting(&self) -> usize {
        self.decisions
            .iter()
            .filter(|d| d.decision.kind.accepts())
            .count()
    }

    /// The decision that settled it, when its decisions did (the last one recorded).
    pub fn settling_decision(&self) -> Option<&HumanTaskDecision> {
        match self.status {
            HumanTaskStatus::Decided => self.decisions.last(),
            HumanTaskStatus::Cancelled => self
                .decisions
                .last()
                .filter(|d| d.decision.kind == DecisionKind::Cancel),
            HumanTaskStatus::Open | HumanTaskStatus::Expired => None,
        }
    }

    /// Why its turn fails when a decline settled it: "the human task … was declined by …".
    pub fn declined(&self) -> Option<String> {
        let last = self.settling_decision()?;
        if self.status != HumanTaskStatus::Decided || last.decision.kind != DecisionKind::Decline {
            return None;
        }
        let why = last
            .decision
            .reason
            .as_deref()
            .map(|r| format!(": {r}"))
            .unwrap_or_default();
        Some(format!(
            "the human task {} was declined by {}{why}",
            self.task.id, last.actor_id
        ))
    }

    /// The status of the gated step (the node) as the task leaves it: `waiting` while open,
    /// `pending` once approved (it may run now), `failed` when declined or expired,
    /// `cancelled` when cancelled.
    pub fn node_status(&self) -> &'static str {
        match self.status {
            HumanTaskStatus::Open => "waiting",
            HumanTaskStatus::Decided
                if self
                    .settling_decision()
                    .is_some_and(|d| d.decision.kind.accepts()) =>
            {
                "pending"
            }
            HumanTaskStatus::Decided | HumanTaskStatus::Expired => "failed",
            HumanTaskStatus::Cancelled => "cancelled",
        }
    }

    /// Why `actor_id`'s decision cannot be recorded now, if it cannot.
    pub fn refuses(&self, actor_id: &str) -> Option<DecisionRefusal> {
        if !self.is_open() {
            return Some(DecisionRefusal::Settled(self.status));
        }
        if self.task.separation_of_duties && self.decisions.iter().any(|d| d.actor_id == actor_id) {
            return Some(DecisionRefusal::RepeatActor);
        }
        if self.decisions.len() >= MAX_HUMAN_TASK_DECISIONS {
            return Some(DecisionRefusal::TooManyDecisions);
        }
        None
    }

    /// Records a decision the checks let through, and settles the task when it does: an
    /// accepting decision that reaches the quorum decides it, a decline decides it at once
    /// (short-circuiting the quorum), a `cancel` cancels it.
    pub(crate) fn record(&mut self, actor_id: &str, decision: &Decision, at_ms: u64) {
        self.decisions.push(HumanTaskDecision {
            actor_id: actor_id.to_owned(),
            decision: decision.clone(),
            decided_at_ms: at_ms,
        });
        match decision.kind {
            kind if kind.accepts() => {
                if self.accepting() >= usize::from(self.task.quorum) {
                    self.status = HumanTaskStatus::Decided;
                }
            }
            DecisionKind::Cancel => {
                self.status = HumanTaskStatus::Cancelled;
                self.reason = Some(
                    decision
                        .reason
                        .clone()
                        .unwrap_or_else(|| format!("{actor_id} cancelled it")),
                );
            }
            _ => self.status = HumanTaskStatus::Decided,
        }
        self.updated_at_ms = at_ms;
    }
}

pub use crate::decision::digest;

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn task(quorum: u8, separation_of_duties: bool) -> HumanTaskState {
        HumanTaskState {
            task: HumanTask {
                id: "task".into(),
                turn_id: "turn".into(),
                node_id: "review".into(),
                attempt_id: "turn:review:1".into(),
                revision_digest: digest(b"r"),
                operation_digest: digest(b"o"),
                operation: json!({}),
                nonce: "n".into(),
                expires_at_ms: 100,
                quorum,
                separation_of_duties,
            },
            status: HumanTaskStatus::Open,
            decisions: Vec::new(),
            reason: None,
            opened_at_ms: 0,
            updated_at_ms: 0,
            opened_position: 1,
        }
    }

    fn approve() -> Decision {
        Decision::of(DecisionKind::AcceptOnce)
    }

    #[test]
    fn the_quorum_of_accepting_decisions_decides_it() {
        let mut t = task(2, true);
        t.record("a", &approve(), 1);
        assert!(t.is_open());
        assert_eq!(t.node_status(), "waiting");
        t.record("b", &approve(), 2);
        assert_eq!(t.status, HumanTaskStatus::Decided);
        assert_eq!(t.node_status(), "pending");
        assert_eq!(
            t.refuses("c"),
            Some(DecisionRefusal::Settled(HumanTaskStatus::Decided))
        );
    }

    #[test]
    fn separation_of_duties_refuses_a_repeat_actor_and_without_it_each_counts() {
        let mut t = task(2, true);
        t.record("a", &approve(), 1);
        assert_eq!(t.refuses("a"), Some(DecisionRefusal::RepeatActor));
        assert_eq!(t.refuses("b"), None);
        let mut t = task(2, false);
        t.record("a", &approve(), 1);
        assert_eq!(t.refuses("a"), None);
        t.record("a", &approve(), 2);
        assert_eq!(t.status, HumanTaskStatus::Decided);
    }

    #[test]
    fn a_decline_short_circuits_the_quorum_and_a_cancel_decision_cancels() {
        let mut t = task(3, true);
        t.record("a", &approve(), 1);
        t.record("b", &Decision::decline("no"), 2);
        assert_eq!(t.status, HumanTaskStatus::Decided);
        assert_eq!(t.node_status(), "failed");
        assert_eq!(
            t.settling_decision().map(|d| d.decision.kind),
            Some(DecisionKind::Decline)
        );
        let mut t = task(1, false);
        t.record("a", &Decision::of(DecisionKind::Cancel), 1);
        assert_eq!(t.status, HumanTaskStatus::Cancelled);
        assert_eq!(t.node_status(), "cancelled");
    }

    #[test]
    fn decisions_are_bounded() {
        let mut t = task(64, false);
        for n in 0..63 {
            t.record("a", &approve(), n);
        }
        assert_eq!(t.refuses("a"), None);
        t.record("a", &approve(), 63);
        assert_eq!(t.status, HumanTaskStatus::Decided);
        let mut t = task(64, false);
        t.decisions = vec![
            HumanTaskDecision {
                actor_id: "a".into(),
                decision: Decision::decline("x"),
                decided_at_ms: 0
            };
            MAX_HUMAN_TASK_DECISIONS
        ];
        assert_eq!(t.refuses("b"), Some(DecisionRefusal::TooManyDecisions));
    }

    #[test]
    fn a_digest_is_the_protocols_form() {
        let d = digest(b"");
        assert_eq!(
            d,
            "sha256:e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}
