//! What the faces share for idempotent mutations: an answer as the runtime's idempotency store
//! keeps it, and the canonical text of params that a fingerprint is taken of.

use std::collections::BTreeMap;

use agentwire_jsonrpc::ErrorObject;
use serde_json::Value;

/// A JSON-RPC answer.
pub(crate) type Answer = Result<Value, ErrorObject>;

/// A mutation's answer as the idempotency store keeps it.
#[derive(serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "camelCase")]
enum Kept {
    Result(Value),
    Error(ErrorObject),
}

/// The bytes the store keeps of `answer`.
pub(crate) fn encode(answer: &Answer) -> Option<Vec<u8>> {
    let kept = match answer {
        Ok(value) => Kept::Result(value.clone()),
        Err(error) => Kept::Error(error.clone()),
    };
    serde_json::to_vec(&kept).ok()
}

/// The answer kept as `bytes`.
pub(crate) fn decode(bytes: &[u8]) -> Answer {
    match serde_json::from_slice::<Kept>(bytes) {
        Ok(Kept::Result(value)) => Ok(value),
        Ok(Kept::Error(error)) => Err(error),
        // Written by `encode` of this build: not reachable, and never a silent success.
        Err(error) => Err(ErrorObject::new(
            -32603,
            format!("a kept answer cannot be read: {error}"),
        )),
    }
}

/// `value` as text with every object's keys sorted: equal params give equal text.
pub(crate) fn canonical(value: &Value) -> String {
    fn sorted(value: &Value) -> Value {
        match value {
            Value::Object(map) => {
                let ordered: BTreeMap<&String, Value> =
                    map.iter().map(|(k, v)| (k, sorted(v))).collect();
                Value::Object(ordered.into_iter().map(|(k, v)| (k.clone(), v)).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}
