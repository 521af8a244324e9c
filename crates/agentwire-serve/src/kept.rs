//! What the faces share for idempotent mutations: running one once per key through the
//! runtime's idempotency store, an answer as the store keeps it, and the canonical text of
//! params that a fingerprint is taken of.

use std::collections::BTreeMap;
use std::future::Future;
use std::sync::Arc;

use agentwire_jsonrpc::ErrorObject;
use agentwire_runtime::{Admission, Fingerprint, IdempotencyStore};
use serde_json::Value;

/// What came of a mutation run through [`once`].
pub(crate) enum Once<A> {
    /// It ran (first time): its answer.
    Ran(A),
    /// It had run with the same fingerprint: the bytes kept of its answer.
    Replayed(Arc<[u8]>),
    /// The key was used for another mutation: it did not run.
    Mismatch,
}

/// Runs `work` once per `scope` and `key` in `store`: the first time it runs, and its answer is
/// kept as `keep` encodes it (`None`: not kept, so a retry runs it again); a retry with the same
/// fingerprint waits while the first runs, then gets the kept bytes; the same key with another
/// fingerprint is [`Once::Mismatch`]. `work` is not polled unless it runs.
pub(crate) async fn once<A>(
    store: &IdempotencyStore,
    scope: &str,
    key: &str,
    print: &Fingerprint,
    work: impl Future<Output = A>,
    keep: impl FnOnce(&A) -> Option<Vec<u8>>,
) -> Once<A> {
    loop {
        let done = store.completed();
        match store.admit(scope, key, print) {
            Admission::Run => break,
            Admission::Replay(bytes) => return Once::Replayed(bytes),
            Admission::Mismatch => return Once::Mismatch,
            Admission::InFlight => done.await,
        }
    }
    let answer = work.await;
    match keep(&answer) {
        Some(bytes) => store.complete(scope, key, &bytes),
        None => store.abandon(scope, key),
    }
    Once::Ran(answer)
}

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
