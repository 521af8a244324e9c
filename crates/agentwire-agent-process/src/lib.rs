//! The agent process adapter: an [`Agent`] of the runtime core (`agentwire-runtime`, through its
//! public API alone) that runs each turn in a child process speaking the agent protocol (docs/agent.md, `protocols/agent/agent.schema.json`) — `turn.start`, decisions,
//! form answers and `turn.cancel` on its standard input; run events, message text, tool output,
//! requests and `turn.end` on its standard output, one JSON object per line.
//!
//! What the agent writes is untrusted: its own messages are validated against the schema, and
//! every other line is a TaskLens run event, ingested through the runlog crate's
//! [`LiveCoercer`] (repairs are reported in the runtime log, never guessed; a line that cannot be
//! repaired is garbage). The agent never decides an approval: whatever it writes that claims an
//! approval outcome is ignored and reported, and a tool call whose approval was not granted is
//! recorded `user_rejected` (or `cancelled`) whatever the agent says. Whatever goes wrong with
//! the process fails only its turn, with a stage and a message; every buffer is bounded.
//!
//! The crate root holds the adapter and the limits of a turn; `config` the command and its
//! settings, `child` the child process and its standard streams, `session` the reading of one
//! turn, `protocol` the agent protocol's messages as the runtime checks and writes them, and
//! `decisions` the runtime's word on approvals, form answers and tool outcomes.
//!
//! [`LiveCoercer`]: agentwire_runlog::LiveCoercer

/// The agent protocol's messages, generated from `protocols/agent/agent.schema.json`.
#[path = "../../../protocols/agent/generated/rust/agent.rs"]
#[rustfmt::skip]
pub mod wire;

mod child;
mod config;
mod decisions;
mod protocol;
mod session;

use std::sync::Arc;
use std::time::Duration;

use agentwire_runtime::{Agent, FailStage, TurnContext, TurnEnd};
use async_trait::async_trait;
use tracing::Instrument as _;

use crate::child::run;

pub use config::{AgentCommandError, AgentProcessConfig};

/// The agent protocol's schema document (canonical text).
pub const AGENT_SCHEMA_TEXT: &str = include_str!("../../../protocols/agent/agent.schema.json");

/// How long an agent may work on a turn by default, not counting the time its requests wait
/// for the host (10 minutes).
pub const DEFAULT_TURN_TIMEOUT: Duration = Duration::from_secs(10 * 60);
/// The longest line an agent may write by default (4 MiB, the runtime faces' frame limit).
pub const DEFAULT_MAX_LINE_BYTES: usize = agentwire_jsonrpc::DEFAULT_MAX_INBOUND_FRAME;
/// How many lines that are not agent protocol messages a turn tolerates by default.
pub const DEFAULT_MAX_GARBAGE_LINES: usize = 16;
/// How many run events one turn may write by default (the live coercer remembers each id).
pub const DEFAULT_MAX_RUN_EVENTS: usize = 100_000;
/// How much of the agent's standard error a failure message quotes by default (its end).
pub const DEFAULT_STDERR_TAIL_BYTES: usize = 2 * 1024;
/// How long a cancelled agent has by default to end its turn before it is killed.
pub const DEFAULT_CANCEL_GRACE: Duration = Duration::from_secs(5);
/// How long an agent has by default to exit after `turn.end` (or after closing its output)
/// before it is killed.
pub const DEFAULT_EXIT_GRACE: Duration = Duration::from_secs(5);
/// The agent name of operations and approvals until a `run:start` names the agent.
pub const DEFAULT_AGENT_NAME: &str = "agent";
/// The message id of `message.delta` and `message.completed` that name none.
pub const DEFAULT_MESSAGE_ID: &str = "reply";

/// The longest line of standard error read whole; a longer one is logged by its length.
pub const MAX_STDERR_LINE_BYTES: usize = 64 * 1024;
/// Tool calls one turn may have open (called, no result yet).
pub const MAX_OPEN_TOOL_CALLS: usize = 1_024;
/// Bytes of input (`args`, as JSON) the open tool calls of one turn may hold.
pub const MAX_OPEN_TOOL_CALL_BYTES: usize = 64 * 1024 * 1024;
/// The longest run event id kept: a longer one is dropped and the event given an id of its own,
/// so what the coercer remembers of each event (its id, twice) stays small.
pub const MAX_RUN_EVENT_ID_BYTES: usize = 256;
/// Messages one turn may have open (deltas written, not completed).
pub const MAX_OPEN_MESSAGES: usize = 256;
/// Requests (approvals and forms) one turn may have waiting for the host at once.
pub const MAX_PENDING_REQUESTS: usize = 64;
/// Approval decisions remembered for the tool calls they name, per turn.
pub const MAX_DECIDED_CALLS: usize = 1_024;
/// Messages queued for the agent's standard input; more means the agent does not read it.
pub const MAX_QUEUED_INPUT: usize = 64;

/// The stream id of an agent's message `message_id` in turn `turn_id`: a UUID (as the
/// protocols' `streamId` is) derived from both, the same for every line of that message.
pub fn message_stream_id(turn_id: &str, message_id: &str) -> String {
    use sha2::Digest as _;
    let digest = sha2::Sha256::new()
        .chain_update(turn_id.as_bytes())
        .chain_update([0])
        .chain_update(message_id.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&digest[..16]);
    bytes[6] = (bytes[6] & 0x0f) | 0x80;
    bytes[8] = (bytes[8] & 0x3f) | 0x80;
    uuid::Uuid::from_bytes(bytes).to_string()
}

/// An [`Agent`] that runs each turn in a new process of the configured command.
#[derive(Debug, Clone)]
pub struct AgentProcess {
    config: Arc<AgentProcessConfig>,
}

impl AgentProcess {
    /// An agent running `config.argv` for each turn.
    pub fn new(config: AgentProcessConfig) -> Result<AgentProcess, AgentCommandError> {
        config.check()?;
        Ok(AgentProcess {
            config: Arc::new(config),
        })
    }

    /// The settings.
    pub fn config(&self) -> &AgentProcessConfig {
        &self.config
    }
}

#[async_trait]
impl Agent for AgentProcess {
    async fn run_turn(&self, turn: TurnContext) -> TurnEnd {
        let span = tracing::info_span!("agent_process", thread = %turn.thread_id(), turn = %turn.turn_id());
        let end = run(&self.config, &turn).instrument(span.clone()).await;
        if let TurnEnd::Failed { stage, message } = &end {
            span.in_scope(|| {
                tracing::warn!(stage = stage.as_str(), "the agent's turn failed: {message}");
            });
        }
        end
    }
}

fn failed(stage: FailStage, message: String) -> TurnEnd {
    TurnEnd::Failed { stage, message }
}
