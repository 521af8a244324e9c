//! The agent protocol's messages as the runtime checks and writes them: the validators of the
//! agent's own messages (compiled once from the embedded schema), the runtime's message types an
//! agent must not write, and the `turn.start` that opens a turn.

use std::sync::OnceLock;

use agentwire_runtime::TurnContext;
use agentwire_schema::{SchemaDocument, Validator, ValidatorCompiler};
use serde_json::{Map, Value};

use crate::{AGENT_SCHEMA_TEXT, wire};

/// The agent protocol validators of what an agent writes, compiled once.
pub(crate) struct Validators {
    pub(crate) by_type: Vec<(&'static str, Validator)>,
}

/// The agent's own messages, by wire type, and their definitions.
const AGENT_MESSAGE_TYPES: &[(&str, &str)] = &[
    ("message.delta", "MessageDelta"),
    ("message.completed", "MessageCompleted"),
    ("tool.output", "ToolOutput"),
    ("approval.request", "ApprovalRequest"),
    ("input.request", "InputRequest"),
    ("turn.end", "TurnEnd"),
];

/// The runtime's messages: an agent that writes one is ignored and reported.
pub(crate) const RUNTIME_MESSAGE_TYPES: &[&str] = &[
    "turn.start",
    "approval.decision",
    "input.result",
    "turn.cancel",
];

pub(crate) fn validators() -> Result<&'static Validators, String> {
    static VALIDATORS: OnceLock<Result<Validators, String>> = OnceLock::new();
    VALIDATORS
        .get_or_init(|| {
            let document = SchemaDocument::from_slice(AGENT_SCHEMA_TEXT.as_bytes())
                .map_err(|e| format!("the agent protocol schema does not load: {e}"))?;
            let compiler = ValidatorCompiler::new(&document)
                .map_err(|e| format!("the agent protocol schema does not compile: {e}"))?;
            let by_type = AGENT_MESSAGE_TYPES
                .iter()
                .map(|(wire, definition)| {
                    compiler
                        .definition(definition)
                        .map(|v| (*wire, v))
                        .map_err(|e| format!("the agent protocol definition {definition}: {e}"))
                })
                .collect::<Result<_, _>>()?;
            Ok(Validators { by_type })
        })
        .as_ref()
        .map_err(Clone::clone)
}

pub(crate) fn turn_start(turn: &TurnContext) -> Value {
    let input = turn.input();
    let message = wire::TurnStart {
        protocol_version: wire::PROTOCOL_VERSION.to_owned(),
        thread_id: turn.thread_id().to_owned(),
        turn_id: turn.turn_id().to_owned(),
        input: wire::TurnInput {
            text: input.text.clone(),
            attachments: input
                .attachments
                .iter()
                .map(|a| wire::AttachmentDescriptor {
                    attachment_id: a.attachment_id.clone(),
                    media_type: a.media_type.clone(),
                    bytes: i64::try_from(a.bytes).unwrap_or(i64::MAX),
                    display_name: a.display_name.clone(),
                    extra: Map::new(),
                })
                .collect(),
            extra: Map::new(),
        },
        extra: Map::new(),
    };
    serde_json::to_value(message).unwrap_or(Value::Null)
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use serde_json::json;

    use super::*;

    #[test]
    fn the_embedded_schema_compiles_a_validator_per_agent_message() {
        let validators = validators().unwrap();
        assert_eq!(validators.by_type.len(), AGENT_MESSAGE_TYPES.len());
        let (_, delta) = &validators.by_type[0];
        assert!(delta.is_valid(&json!({"type": "message.delta", "delta": "hi"})));
        assert!(!delta.is_valid(&json!({"type": "message.delta"})));
    }
}
