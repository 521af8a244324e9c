//! A host's decision on an approval, as every face hands it to the core: one of five kinds
//! (`acceptOnce`, `acceptForTurn`, `acceptForSession`, `decline`, `cancel`), read from its JSON
//! form by [`Decision::parse`], which fails closed: anything that is not exactly one of the five
//! closed shapes is refused with the reason, and a refused decision never approves.
//!
//! The JSON form is ChainlessChain's `ApprovalDecision` (docs/runtime.md, "Decisions"):
//! `{"kind":"acceptOnce"}`; `{"kind":"acceptForTurn"|"acceptForSession","permissions"?:[grant]}`
//! with at most 64 grants `{capability (1..128 chars), scope (1..1024), expiresAt?: string|null}`;
//! `{"kind":"decline"|"cancel","reason"?: string of at most 2,048 characters}`.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// Most grants a decision carries.
pub const MAX_GRANTS: usize = 64;
/// Longest reason of a `decline` or `cancel`, in characters.
pub const MAX_REASON_CHARS: usize = 2048;
/// Longest grant capability, in characters.
pub const MAX_CAPABILITY_CHARS: usize = 128;
/// Longest grant scope, in characters.
pub const MAX_SCOPE_CHARS: usize = 1024;

/// What a decision does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum DecisionKind {
    /// Approve this request only.
    AcceptOnce,
    /// Approve it, and every identical request later in the same turn without asking.
    AcceptForTurn,
    /// Approve it, and every identical request later in the thread (the session) without
    /// asking; the grant is durable.
    AcceptForSession,
    /// Refuse it.
    Decline,
    /// Refuse it: the person dismissed the question rather than answering it.
    Cancel,
}

impl DecisionKind {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            DecisionKind::AcceptOnce => "acceptOnce",
            DecisionKind::AcceptForTurn => "acceptForTurn",
            DecisionKind::AcceptForSession => "acceptForSession",
            DecisionKind::Decline => "decline",
            DecisionKind::Cancel => "cancel",
        }
    }

    /// The kind named `name`.
    pub fn parse(name: &str) -> Option<DecisionKind> {
        Some(match name {
            "acceptOnce" => DecisionKind::AcceptOnce,
            "acceptForTurn" => DecisionKind::AcceptForTurn,
            "acceptForSession" => DecisionKind::AcceptForSession,
            "decline" => DecisionKind::Decline,
            "cancel" => DecisionKind::Cancel,
            _ => return None,
        })
    }

    /// Whether it approves.
    pub fn accepts(self) -> bool {
        matches!(
            self,
            DecisionKind::AcceptOnce | DecisionKind::AcceptForTurn | DecisionKind::AcceptForSession
        )
    }
}

/// A permission an accepting decision grants.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct PermissionGrant {
    /// What may be done.
    pub capability: String,
    /// Where.
    pub scope: String,
    /// Until when; `None` for as long as the decision holds.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<String>,
}

/// A host's decision.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Decision {
    /// What it does.
    pub kind: DecisionKind,
    /// Why, for a `decline` or `cancel`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What an `acceptForTurn` or `acceptForSession` grants.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub permissions: Vec<PermissionGrant>,
}

impl Decision {
    /// A decision of `kind` with no reason and no grants.
    pub fn of(kind: DecisionKind) -> Decision {
        Decision {
            kind,
            reason: None,
            permissions: Vec::new(),
        }
    }

    /// A `decline` with `reason`.
    pub fn decline(reason: impl Into<String>) -> Decision {
        Decision {
            kind: DecisionKind::Decline,
            reason: Some(reason.into()),
            permissions: Vec::new(),
        }
    }

    /// Reads a decision from its JSON form, exactly: an unknown kind, a missing or extra field,
    /// or a field out of its bounds is refused with what is wrong.
    ///
    /// # Errors
    /// The reason the value is not a decision, such as `"permissions is not a field of an
    /// acceptOnce decision"`.
    pub fn parse(value: &Value) -> Result<Decision, String> {
        let Some(object) = value.as_object() else {
            return Err("a decision is an object".into());
        };
        let kind = match object.get("kind") {
            None => return Err("the decision has no kind".into()),
            Some(Value::String(name)) => DecisionKind::parse(name)
                .ok_or_else(|| format!("{name:?} is not a decision kind"))?,
            Some(_) => return Err("kind is not a string".into()),
        };
        let allowed: &[&str] = match kind {
            DecisionKind::AcceptOnce => &["kind"],
            DecisionKind::AcceptForTurn | DecisionKind::AcceptForSession => {
                &["kind", "permissions"]
            }
            DecisionKind::Decline | DecisionKind::Cancel => &["kind", "reason"],
        };
        if let Some(extra) = object.keys().find(|k| !allowed.contains(&k.as_str())) {
            let article = if kind.accepts() { "an" } else { "a" };
            return Err(format!(
                "{extra} is not a field of {article} {} decision",
                kind.as_str()
            ));
        }
        let reason = match object.get("reason") {
            None => None,
            Some(Value::String(reason)) if reason.chars().count() <= MAX_REASON_CHARS => {
                Some(reason.clone())
            }
            Some(_) => {
                return Err(format!(
                    "reason is a string of at most {MAX_REASON_CHARS} characters"
                ));
            }
        };
        let permissions = match object.get("permissions") {
            None => Vec::new(),
            Some(Value::Array(grants)) if grants.len() <= MAX_GRANTS => grants
                .iter()
                .enumerate()
                .map(|(i, grant)| grant_of(grant).map_err(|e| format!("permissions[{i}]: {e}")))
                .collect::<Result<_, _>>()?,
            Some(_) => {
                return Err(format!(
                    "permissions is an array of at most {MAX_GRANTS} grants"
                ));
            }
        };
        Ok(Decision {
            kind,
            reason,
            permissions,
        })
    }

    /// Its JSON form (what [`parse`](Self::parse) reads).
    pub fn to_value(&self) -> Value {
        serde_json::to_value(self).unwrap_or(Value::Null)
    }
}

/// One grant, exactly.
fn grant_of(value: &Value) -> Result<PermissionGrant, String> {
    let Some(object) = value.as_object() else {
        return Err("a grant is an object".into());
    };
    if let Some(extra) = object
        .keys()
        .find(|k| !matches!(k.as_str(), "capability" | "scope" | "expiresAt"))
    {
        return Err(format!("{extra} is not a field of a grant"));
    }
    let text = |object: &Map<String, Value>, name: &str, max: usize| match object.get(name) {
        Some(Value::String(s)) if !s.is_empty() && s.chars().count() <= max => Ok(s.clone()),
        Some(_) => Err(format!("{name} is a string of 1 to {max} characters")),
        None => Err(format!("the grant has no {name}")),
    };
    let expires_at = match object.get("expiresAt") {
        None | Some(Value::Null) => None,
        Some(Value::String(at)) => Some(at.clone()),
        Some(_) => return Err("expiresAt is a timestamp or null".into()),
    };
    Ok(PermissionGrant {
        capability: text(object, "capability", MAX_CAPABILITY_CHARS)?,
        scope: text(object, "scope", MAX_SCOPE_CHARS)?,
        expires_at,
    })
}

/// What settled an approval: the kind of the host's decision, a grant an earlier decision
/// gave, or why there is no decision to take (recorded with the resolution, and reported by
/// faces, such as the App Server's `approval/resolved` `via`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub enum Via {
    /// A host's `acceptOnce`.
    AcceptOnce,
    /// A host's `acceptForTurn`.
    AcceptForTurn,
    /// A host's `acceptForSession`.
    AcceptForSession,
    /// A host's `decline`.
    Decline,
    /// A host's `cancel`.
    Cancel,
    /// Not asked: an `acceptForTurn` earlier in the turn covers an identical request.
    TurnGrant,
    /// Not asked: an `acceptForSession` earlier in the thread covers an identical request.
    SessionGrant,
    /// The host's answer was not a decision.
    Invalid,
    /// The host answered with an error.
    Error,
    /// The host did not answer in time.
    Timeout,
    /// The decision named another request than the one pending (its binding did not match).
    Binding,
}

impl Via {
    /// Its name on the wire.
    pub fn as_str(self) -> &'static str {
        match self {
            Via::AcceptOnce => "acceptOnce",
            Via::AcceptForTurn => "acceptForTurn",
            Via::AcceptForSession => "acceptForSession",
            Via::Decline => "decline",
            Via::Cancel => "cancel",
            Via::TurnGrant => "turnGrant",
            Via::SessionGrant => "sessionGrant",
            Via::Invalid => "invalid",
            Via::Error => "error",
            Via::Timeout => "timeout",
            Via::Binding => "binding",
        }
    }

    /// How a decision of `kind` settles.
    pub fn of(kind: DecisionKind) -> Via {
        match kind {
            DecisionKind::AcceptOnce => Via::AcceptOnce,
            DecisionKind::AcceptForTurn => Via::AcceptForTurn,
            DecisionKind::AcceptForSession => Via::AcceptForSession,
            DecisionKind::Decline => Via::Decline,
            DecisionKind::Cancel => Via::Cancel,
        }
    }
}

/// The rule the runtime applies to approvals; a binding's `policyDigest` is its digest, so a
/// decision made under another rule does not bind.
pub const APPROVAL_POLICY: &str = "agentwire approval policy 1: an approval is taken only from an acceptOnce, acceptForTurn or acceptForSession decision bound to the pending request; acceptForTurn covers identical requests later in the turn, acceptForSession identical requests later in the thread; a decision may grant only the permissions the request asks for; anything else refuses the tool";

/// `sha256:` and the lowercase hex SHA-256 of `bytes`.
pub fn digest(bytes: &[u8]) -> String {
    use sha2::{Digest as _, Sha256};
    use std::fmt::Write as _;
    let mut out = String::with_capacity(7 + 64);
    out.push_str("sha256:");
    for byte in Sha256::digest(bytes) {
        let _ = write!(out, "{byte:02x}");
    }
    out
}

/// The digest of [`APPROVAL_POLICY`].
pub fn policy_digest() -> &'static str {
    static DIGEST: std::sync::OnceLock<String> = std::sync::OnceLock::new();
    DIGEST.get_or_init(|| digest(APPROVAL_POLICY.as_bytes()))
}

/// What the runtime binds an approval to when it opens it, recorded with the interaction: a
/// nonce of its own, the digest of the operation asked about (two requests with the same
/// digest are identical, which is what a grant covers), the policy's digest, and the
/// permissions it asks for (all a decision may grant).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase", deny_unknown_fields)]
pub struct Binding {
    /// Unique to this request.
    pub nonce: String,
    /// The digest of the operation: its agent, tool and preview.
    pub operation_digest: String,
    /// The digest of the policy it was asked under.
    pub policy_digest: String,
    /// What it asks to be allowed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub requested_permissions: Vec<PermissionGrant>,
}

/// An approval's whole binding, as a face presents it to a host and hands it back with the
/// host's decision: the [`Binding`] and where the request stands (thread, turn, item, attempt,
/// workspace, deadline). [`Runtime::decide`](crate::Runtime::decide) takes a decision only
/// when every field equals the pending request's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApprovalBinding {
    /// The thread.
    pub thread_id: String,
    /// The turn that asks.
    pub turn_id: String,
    /// The request (the interaction's id).
    pub item_id: String,
    /// The attempt of the step that asks; the runtime's turns have none.
    pub attempt_id: Option<String>,
    /// See [`Binding::operation_digest`].
    pub operation_digest: String,
    /// See [`Binding::policy_digest`].
    pub policy_digest: String,
    /// The digest of the workspace the operation acts on; the runtime binds none.
    pub workspace_digest: Option<String>,
    /// See [`Binding::nonce`].
    pub nonce: String,
    /// When the request expires (milliseconds since the Unix epoch).
    pub expires_at_ms: u64,
    /// See [`Binding::requested_permissions`].
    pub requested_permissions: Vec<PermissionGrant>,
}

impl ApprovalBinding {
    /// The first field in which `self` (as presented) differs from `pending` (the request as
    /// it stands), with both values, or `None` when they are the same request.
    pub fn mismatch(&self, pending: &ApprovalBinding) -> Option<String> {
        let fields: [(&str, String, String); 8] = [
            (
                "threadId",
                self.thread_id.clone(),
                pending.thread_id.clone(),
            ),
            ("turnId", self.turn_id.clone(), pending.turn_id.clone()),
            ("itemId", self.item_id.clone(), pending.item_id.clone()),
            (
                "attemptId",
                format!("{:?}", self.attempt_id),
                format!("{:?}", pending.attempt_id),
            ),
            (
                "operationDigest",
                self.operation_digest.clone(),
                pending.operation_digest.clone(),
            ),
            (
                "policyDigest",
                self.policy_digest.clone(),
                pending.policy_digest.clone(),
            ),
            (
                "workspaceDigest",
                format!("{:?}", self.workspace_digest),
                format!("{:?}", pending.workspace_digest),
            ),
            ("nonce", self.nonce.clone(), pending.nonce.clone()),
        ];
        if let Some((name, given, current)) = fields.into_iter().find(|(_, a, b)| a != b) {
            return Some(format!(
                "the decision is bound to {name} {given}, and the request's is {current}"
            ));
        }
        if self.expires_at_ms != pending.expires_at_ms {
            return Some(format!(
                "the decision is bound to a request expiring at {} ms, and the request expires at {} ms",
                self.expires_at_ms, pending.expires_at_ms
            ));
        }
        if self.requested_permissions != pending.requested_permissions {
            return Some("the decision is bound to other requested permissions".into());
        }
        None
    }
}

/// The digest of an approval's operation: its agent, tool and preview, as compact JSON.
pub fn operation_digest(agent_name: &str, tool_name: &str, preview: &Value) -> String {
    let operation = serde_json::json!({"agent": agent_name, "tool": tool_name, "preview": preview});
    digest(operation.to_string().as_bytes())
}

/// Whether `decision` grants only what `requested` asks for: each of its permissions names a
/// requested capability and scope. `Err` names the first that does not.
pub fn within(decision: &Decision, requested: &[PermissionGrant]) -> Result<(), String> {
    match decision.permissions.iter().find(|grant| {
        !requested
            .iter()
            .any(|r| r.capability == grant.capability && r.scope == grant.scope)
    }) {
        None => Ok(()),
        Some(grant) => Err(format!(
            "the decision grants {} on {}, which the request does not ask for",
            grant.capability, grant.scope
        )),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn the_five_kinds_read_exactly() {
        assert_eq!(
            Decision::parse(&json!({"kind": "acceptOnce"})),
            Ok(Decision::of(DecisionKind::AcceptOnce))
        );
        let grant = json!({"capability": "shell", "scope": "/repo", "expiresAt": null});
        let turn = Decision::parse(&json!({"kind": "acceptForTurn", "permissions": [grant]}))
            .expect("valid");
        assert_eq!(turn.kind, DecisionKind::AcceptForTurn);
        assert_eq!(turn.permissions[0].scope, "/repo");
        assert_eq!(
            Decision::parse(&json!({"kind": "acceptForSession", "permissions": []}))
                .map(|d| d.kind),
            Ok(DecisionKind::AcceptForSession)
        );
        assert_eq!(
            Decision::parse(&json!({"kind": "decline", "reason": "no"})),
            Ok(Decision::decline("no"))
        );
        assert_eq!(
            Decision::parse(&json!({"kind": "cancel"})),
            Ok(Decision::of(DecisionKind::Cancel))
        );
    }

    #[test]
    fn anything_else_is_refused_with_the_reason() {
        let refused = |v: Value| Decision::parse(&v).expect_err("refused");
        assert_eq!(refused(json!(true)), "a decision is an object");
        assert_eq!(refused(json!({})), "the decision has no kind");
        assert_eq!(
            refused(json!({"kind": "approve"})),
            "\"approve\" is not a decision kind"
        );
        assert_eq!(
            refused(json!({"kind": "acceptOnce", "permissions": []})),
            "permissions is not a field of an acceptOnce decision"
        );
        assert_eq!(
            refused(json!({"kind": "decline", "permissions": []})),
            "permissions is not a field of a decline decision"
        );
        assert_eq!(
            refused(json!({"kind": "acceptForTurn", "permissions": [{"capability": "x"}]})),
            "permissions[0]: the grant has no scope"
        );
        assert_eq!(
            refused(
                json!({"kind": "acceptForTurn", "permissions": [{"capability": "x", "scope": "y", "z": 1}]})
            ),
            "permissions[0]: z is not a field of a grant"
        );
        assert_eq!(
            refused(json!({"kind": "acceptForSession", "permissions": null})),
            "permissions is an array of at most 64 grants"
        );
        assert_eq!(
            refused(json!({"kind": "decline", "reason": "x".repeat(2049)})),
            "reason is a string of at most 2048 characters"
        );
        assert_eq!(
            refused(json!({"kind": "cancel", "reason": null})),
            "reason is a string of at most 2048 characters"
        );
    }

    fn binding() -> ApprovalBinding {
        ApprovalBinding {
            thread_id: "t".into(),
            turn_id: "u".into(),
            item_id: "i".into(),
            attempt_id: None,
            operation_digest: operation_digest("demo", "shell", &json!({"command": "ls"})),
            policy_digest: policy_digest().to_owned(),
            workspace_digest: None,
            nonce: "n".into(),
            expires_at_ms: 9,
            requested_permissions: vec![PermissionGrant {
                capability: "shell".into(),
                scope: "t".into(),
                expires_at: None,
            }],
        }
    }

    #[test]
    fn a_binding_names_the_first_field_that_differs() {
        let pending = binding();
        assert_eq!(binding().mismatch(&pending), None);
        let mut stale = binding();
        stale.nonce = "old".into();
        assert_eq!(
            stale.mismatch(&pending).as_deref(),
            Some("the decision is bound to nonce old, and the request's is n")
        );
        let mut other = binding();
        other.operation_digest = operation_digest("demo", "shell", &json!({"command": "rm"}));
        assert!(
            other
                .mismatch(&pending)
                .unwrap()
                .starts_with("the decision is bound to operationDigest sha256:")
        );
        let mut late = binding();
        late.expires_at_ms = 10;
        assert_eq!(
            late.mismatch(&pending).as_deref(),
            Some(
                "the decision is bound to a request expiring at 10 ms, and the request expires at 9 ms"
            )
        );
        assert_eq!(policy_digest().len(), 71);
    }

    #[test]
    fn a_decision_grants_only_what_is_asked() {
        let requested = binding().requested_permissions;
        let grant = |capability: &str, scope: &str| {
            Decision::parse(&json!({"kind": "acceptForSession", "permissions": [{"capability": capability, "scope": scope}]})).unwrap()
        };
        assert_eq!(within(&grant("shell", "t"), &requested), Ok(()));
        assert_eq!(
            within(&Decision::of(DecisionKind::AcceptForTurn), &requested),
            Ok(())
        );
        assert_eq!(
            within(&grant("shell", "*"), &requested),
            Err("the decision grants shell on *, which the request does not ask for".into())
        );
    }

    #[test]
    fn a_decision_round_trips_through_its_json_form() {
        let decision = Decision::parse(&json!({
            "kind": "acceptForSession",
            "permissions": [{"capability": "shell", "scope": "/repo"}]
        }))
        .expect("valid");
        assert_eq!(Decision::parse(&decision.to_value()), Ok(decision));
    }
}
