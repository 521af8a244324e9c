//! The Roll wire shapes of the core's records, built in the newest version's form (1.5) and
//! projected down per connection by `agentwire_roll::project`: the typed results of the method
//! table (`snapshot`), and the `runtime.event` envelopes, written as bytes by one writer
//! (`envelope`) from one typed event whose `project` holds the face's version rules for events
//! (`event`). Pure functions and per-connection writers: no I/O.

use std::time::{Duration, UNIX_EPOCH};

use agentwire_roll::constants::js_length;
use agentwire_runtime::{Interaction, InteractionKind, Resolution};
use serde_json::{Map, Value, json};

mod envelope;
mod event;
mod snapshot;

pub use envelope::{Durability, EnvelopeWriter};
pub use event::{
    DecodedEvent, JsonText, RuntimeEvent, StoredEvent, ToolCompleted, durable_event, live_event,
    stored_event,
};
pub use snapshot::{
    SnapshotPaging, WireError, attachment_descriptor, full_snapshot, is_thread_id,
    operation_result_view, operation_view, recovery_snapshot, thread_summary, wire_value,
};

/// An RFC 3339 timestamp (UTC, milliseconds) of a time in milliseconds since the Unix epoch.
pub fn timestamp(ms: u64) -> String {
    Timestamp(ms).to_string()
}

/// A time in milliseconds since the Unix epoch as its RFC 3339 [`timestamp`], displayed
/// without building the string first.
#[derive(Debug, Clone, Copy)]
pub struct Timestamp(pub u64);

impl std::fmt::Display for Timestamp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(self.0)).fmt(f)
    }
}

/// At most `limit` UTF-16 code units of `text`, cut at a character boundary.
pub fn truncate_js(text: &str, limit: usize) -> String {
    if js_length(text) <= limit {
        return text.to_owned();
    }
    let mut used = 0;
    let mut out = String::new();
    for c in text.chars() {
        used += c.len_utf16();
        if used > limit {
            break;
        }
        out.push(c);
    }
    out
}

/// A `PendingApproval` of an approval interaction; `None` for other interactions.
pub fn pending_approval(interaction: &Interaction) -> Option<Value> {
    let InteractionKind::Approval {
        approval_id,
        agent_name,
        tool_name,
        preview,
        reason,
    } = &interaction.ask
    else {
        return None;
    };
    let mut out = Map::new();
    out.insert("id".into(), Value::String(approval_id.clone()));
    out.insert("turnId".into(), Value::String(interaction.turn_id.clone()));
    out.insert("agentName".into(), Value::String(agent_name.clone()));
    out.insert("toolName".into(), Value::String(tool_name.clone()));
    out.insert("preview".into(), preview.clone());
    if let Some(reason) = reason {
        out.insert("reason".into(), Value::String(reason.clone()));
    }
    Some(Value::Object(out))
}

/// The server-request method an interaction is delivered with.
pub fn interaction_method(interaction: &Interaction) -> &'static str {
    match interaction.ask {
        InteractionKind::Approval { .. } => "approval.request",
        InteractionKind::UserInput { .. } => "userInput.request",
    }
}

fn interaction_metadata(thread_id: &str, interaction: &Interaction) -> Map<String, Value> {
    let mut out = Map::new();
    out.insert(
        "interactionId".into(),
        Value::String(interaction.id.clone()),
    );
    out.insert("threadId".into(), Value::String(thread_id.to_owned()));
    out.insert("turnId".into(), Value::String(interaction.turn_id.clone()));
    out.insert(
        "expiresAt".into(),
        Value::String(timestamp(interaction.expires_at_ms)),
    );
    out.insert("sensitivity".into(), Value::String("normal".into()));
    out
}

fn form_fields(out: &mut Map<String, Value>, interaction: &Interaction) {
    if let InteractionKind::UserInput {
        title,
        description,
        controls,
    } = &interaction.ask
    {
        if let Some(title) = title {
            out.insert("title".into(), Value::String(title.clone()));
        }
        if let Some(description) = description {
            out.insert("description".into(), Value::String(description.clone()));
        }
        out.insert("controls".into(), controls.clone());
    }
}

/// The server-request params of an interaction, in the 1.2+ interaction shape.
pub fn server_request_params(thread_id: &str, interaction: &Interaction) -> Value {
    let mut out = interaction_metadata(thread_id, interaction);
    match pending_approval(interaction) {
        Some(approval) => {
            out.insert("approval".into(), approval);
        }
        None => form_fields(&mut out, interaction),
    }
    Value::Object(out)
}

/// The `resolution` of an `approval.resolved` event.
pub fn approval_resolution(resolution: &Resolution) -> Value {
    match resolution {
        Resolution::Approved => json!({"status": "resolved", "decision": "approve"}),
        Resolution::Rejected { reason } => {
            let mut out = json!({"status": "resolved", "decision": "reject"});
            if let Some(reason) = reason.as_ref().filter(|r| !r.is_empty()) {
                out["reason"] = Value::String(reason.clone());
            }
            out
        }
        Resolution::Cancelled { reason } => {
            let reason = if reason.is_empty() {
                "cancelled"
            } else {
                reason
            };
            json!({"status": "cancelled", "reason": reason})
        }
        Resolution::Expired => json!({"status": "expired", "reason": "the deadline passed"}),
        // A form's result is never an approval's; reported as a cancel if it ever were.
        Resolution::Submitted { .. } => {
            json!({"status": "cancelled", "reason": "not an approval decision"})
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(timestamp(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(timestamp(1_764_590_400_123), "2025-12-01T12:00:00.123Z");
    }

    #[test]
    fn truncation_counts_utf16_units_and_keeps_whole_characters() {
        assert_eq!(truncate_js("abc", 5), "abc");
        assert_eq!(truncate_js("a😀b", 2), "a");
        assert_eq!(truncate_js("a😀b", 3), "a😀");
    }
}
