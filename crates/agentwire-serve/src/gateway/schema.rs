//! Our schema of the gateway surface (`protocols/openclaw-gateway/`), compiled once: every
//! inbound frame, the `connect` params and each method's params are checked with the compiled
//! fast path before the gateway acts on them.

use serde_json::Value;

use crate::checked::CheckedSchema;

/// The schema's text.
pub(super) const SCHEMA_TEXT: &str =
    include_str!("../../../../protocols/openclaw-gateway/gateway.schema.json");

static SCHEMA: CheckedSchema = CheckedSchema::new("the gateway schema", SCHEMA_TEXT);

/// The definition of each method's params.
const PARAMS: &[(&str, &str)] = &[
    ("health", "HealthParams"),
    ("status", "StatusParams"),
    ("system-presence", "SystemPresenceParams"),
    ("sessions.list", "SessionsListParams"),
    ("sessions.create", "SessionsCreateParams"),
    ("sessions.subscribe", "SessionsSubscribeParams"),
    ("chat.history", "ChatHistoryParams"),
    ("chat.send", "ChatSendParams"),
    ("agent", "AgentParams"),
    ("exec.approval.resolve", "ExecApprovalResolveParams"),
];

/// Checks a request frame (`RequestFrame`).
pub(super) fn check_request(frame: &Value) -> Result<(), String> {
    SCHEMA.check(Some("RequestFrame"), frame, "")
}

/// Checks `connect` params (`ConnectParams`).
pub(super) fn check_connect(params: &Value) -> Result<(), String> {
    SCHEMA.check(Some("ConnectParams"), params, "params")
}

/// Checks the params of `method` against its definition.
pub(super) fn check_params(method: &str, params: &Value) -> Result<(), String> {
    let name = PARAMS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, def)| *def)
        .ok_or_else(|| format!("{method} has no params definition"))?;
    SCHEMA.check(Some(name), params, "params")
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn every_served_method_has_its_params_and_bad_params_say_where() {
        for method in super::super::scopes::METHODS {
            assert!(
                PARAMS.iter().any(|(m, def)| m == method && SCHEMA.has(def)),
                "{method}"
            );
        }
        assert_eq!(check_params("health", &json!({})), Ok(()));
        let bad = check_params("chat.send", &json!({})).unwrap_err();
        assert!(bad.starts_with("params: "), "{bad}");
        assert!(check_request(&json!({"type": "req", "id": "a", "method": "health"})).is_ok());
        assert!(check_request(&json!({"type": "req", "id": 7, "method": "health"})).is_err());
    }
}
