//! The scenarios: one table of what each proves and the versions it applies to, and the code
//! that proves it, grouped by area (`handshake`, `methods`, `events`, `interactions`,
//! `follow`).

mod events;
mod follow;
mod handshake;
mod interactions;
mod methods;

use std::time::{Duration, Instant};

use agentwire_roll::ProtocolVersion;

use super::script::{CommandLine, Script, TrimHook};
use super::wire::{Failure, Wire};

/// How long the suite watches for frames that must not come (an interaction before the
/// capability ACK, a replayed event after the barrier).
pub(crate) const QUIET_PERIOD: Duration = Duration::from_millis(300);

/// Both server requests, as a client that answers them declares.
pub(crate) const HANDLERS: [&str; 2] = ["approval.request", "userInput.request"];

/// What a scenario needs beyond a version.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Need {
    /// `--trim-hook`.
    TrimHook,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Id {
    Negotiation,
    Capabilities,
    NoInteractionBeforeAck,
    Methods,
    BadParams,
    NewerVersion,
    Idempotency,
    SnapshotPaging,
    Resume,
    ResumeExpired,
    RecoverySnapshot,
    Approval,
    UserInput,
    ClientFollow,
}

/// One protocol scenario: what it proves and the versions it applies to.
#[derive(Debug)]
pub struct Scenario {
    /// Its name (`negotiation`, `resume`, …).
    pub name: &'static str,
    /// What it proves, in one sentence.
    pub proves: &'static str,
    /// The oldest version it applies to.
    pub since: ProtocolVersion,
    /// The newest version it applies to.
    pub until: ProtocolVersion,
    /// Why it does not apply outside `since..=until`.
    pub outside: &'static str,
    pub(crate) needs: Option<Need>,
    id: Id,
}

use ProtocolVersion::{V1_0, V1_2, V1_3, V1_4, V1_5};

/// Every scenario, in the order they run.
pub(crate) static ALL: [Scenario; 14] = [
    Scenario {
        name: "negotiation",
        proves: "initialize picks the first offered version the runtime supports, skipping unknown ones; no common version is PROTOCOL_VERSION_UNSUPPORTED; a call before initialize is INITIALIZE_REQUIRED; a second initialize is CAPABILITY_UNAVAILABLE and changes nothing",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::Negotiation,
    },
    Scenario {
        name: "capabilities",
        proves: "client.capabilities.set answers the intersection with the registry in registry order, never an unknown name; the same revision and set is an idempotent retry; a stale revision or another set under the same revision is CAPABILITY_REVISION_CONFLICT",
        since: V1_2,
        until: V1_5,
        outside: "client.capabilities.set exists from 1.2",
        needs: None,
        id: Id::Capabilities,
    },
    Scenario {
        name: "no-interaction-before-ack",
        proves: "an approval asked before client.capabilities.set is not sent until the ACK, and the ACK frame is written before the approval.request",
        since: V1_2,
        until: V1_5,
        outside: "the capability handshake exists from 1.2 (1.1 is interaction-ready at initialize)",
        needs: None,
        id: Id::NoInteractionBeforeAck,
    },
    Scenario {
        name: "methods",
        proves: "the happy path of every method that needs no agent-specific behaviour: thread.create, list (paged), rename, open, snapshot, capabilities, detach, delete, operation.get of an unknown operation, turn.start and turn.cancel",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::Methods,
    },
    Scenario {
        name: "bad-params",
        proves: "params that break the version's schema are -32602 with rollCode INVALID_PARAMS, unknown methods -32601, and the session goes on",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::BadParams,
    },
    Scenario {
        name: "newer-version",
        proves: "a method of a newer version is -32601 and params only a newer version has are INVALID_PARAMS",
        since: V1_0,
        until: V1_4,
        outside: "1.5 is the newest version: no newer method or params exist",
        needs: None,
        id: Id::NewerVersion,
    },
    Scenario {
        name: "idempotency",
        proves: "a mutation retried with the same requestId gets the same result and acts once; the same requestId with other params or another method is INVALID_PARAMS; turn.start de-duplicates on turnId",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::Idempotency,
    },
    Scenario {
        name: "snapshot-paging",
        proves: "thread.snapshot pages messages and operations independently, newest page first and oldest first inside, with nextBeforeSequence leading to the rest without gaps or repeats",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::SnapshotPaging,
    },
    Scenario {
        name: "resume",
        proves: "runtime.events.resume replays the durable events after a cursor before its answer, answers {throughCursor, replayedCount} consistent with the cursor distance, nothing on an empty thread, and refuses unknown, forged and other threads' cursors with EVENT_CURSOR_GAP",
        since: V1_3,
        until: V1_5,
        outside: "runtime.events.resume exists from 1.3",
        needs: None,
        id: Id::Resume,
    },
    Scenario {
        name: "resume-expired",
        proves: "after the oldest events are trimmed a resume from null (or from a trimmed checkpoint) is EVENT_CURSOR_EXPIRED, never a silently shorter replay",
        since: V1_3,
        until: V1_5,
        outside: "runtime.events.resume exists from 1.3",
        needs: Some(Need::TrimHook),
        id: Id::ResumeExpired,
    },
    Scenario {
        name: "recovery-snapshot",
        proves: "thread.snapshot with recovery:true answers a thread of many events in one small frame: the checkpoint and metadata only, no history",
        since: V1_3,
        until: V1_5,
        outside: "recovery snapshots exist from 1.3",
        needs: None,
        id: Id::RecoverySnapshot,
    },
    Scenario {
        name: "approval",
        proves: "an approval travels the version's write path (approval.respond on 1.0, the approval.request server request from 1.1) for approve and reject, shows in the snapshot while pending, and resolves as answered",
        since: V1_0,
        until: V1_5,
        outside: "",
        needs: None,
        id: Id::Approval,
    },
    Scenario {
        name: "user-input",
        proves: "a userInput.request carries a valid form; a submitted answer and a cancelled one both end the turn without failing it, and the snapshot shows the turn waiting for the user meanwhile",
        since: V1_2,
        until: V1_5,
        outside: "userInput.request exists from 1.2",
        needs: None,
        id: Id::UserInput,
    },
    Scenario {
        name: "client-follow",
        proves: "the agentwire Roll client negotiates with the runtime on its own terms and follows a thread gap-free across a replay and live turns",
        since: V1_3,
        until: V1_5,
        outside: "following a thread needs runtime.events.resume (1.3)",
        needs: None,
        id: Id::ClientFollow,
    },
];

/// What a scenario runs with.
#[derive(Debug, Clone)]
pub(crate) struct Context {
    /// The version under test.
    pub(crate) version: ProtocolVersion,
    /// Every version of the run.
    pub(crate) tested: Vec<ProtocolVersion>,
    pub(crate) command: CommandLine,
    pub(crate) script: Script,
    pub(crate) trim_hook: Option<TrimHook>,
    pub(crate) timeout: Duration,
    pub(crate) deadline: Instant,
}

impl Context {
    /// A fresh runtime process.
    pub(crate) fn spawn(&self) -> Result<Wire, Failure> {
        Wire::spawn(&self.command, self.version, self.timeout, self.deadline)
    }

    /// A fresh runtime, initialized on the version under test with both handlers.
    pub(crate) async fn open(&self) -> Result<Wire, Failure> {
        let mut wire = self.spawn()?;
        wire.open(&HANDLERS).await?;
        Ok(wire)
    }
}

/// Runs one scenario, bounded by the context's deadline.
pub(crate) async fn run(scenario: &Scenario, context: Context) -> Result<(), Failure> {
    let left = context.deadline.saturating_duration_since(Instant::now());
    let work = async move {
        match scenario.id {
            Id::Negotiation => handshake::negotiation(&context).await,
            Id::Capabilities => handshake::capabilities(&context).await,
            Id::NoInteractionBeforeAck => handshake::no_interaction_before_ack(&context).await,
            Id::Methods => methods::methods(&context).await,
            Id::BadParams => methods::bad_params(&context).await,
            Id::NewerVersion => methods::newer_version(&context).await,
            Id::Idempotency => methods::idempotency(&context).await,
            Id::SnapshotPaging => methods::snapshot_paging(&context).await,
            Id::Resume => events::resume(&context).await,
            Id::ResumeExpired => events::resume_expired(&context).await,
            Id::RecoverySnapshot => events::recovery_snapshot(&context).await,
            Id::Approval => interactions::approval(&context).await,
            Id::UserInput => interactions::user_input(&context).await,
            Id::ClientFollow => follow::client_follow(&context).await,
        }
    };
    match tokio::time::timeout(left, work).await {
        Ok(outcome) => outcome,
        Err(_) => Err(Failure::new(format!(
            "the scenario did not finish within its {} ms",
            left.as_millis()
        ))),
    }
}
