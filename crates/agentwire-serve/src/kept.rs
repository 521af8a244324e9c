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

/// What a mutation interrupted before it was answered is answered when retried: its outcome
/// is unknown (it may have taken effect, or part of it), so it is neither run again, which could
/// do it twice, nor waited for.
pub(crate) const INTERRUPTED: &str = "the first request with this id was interrupted (its \
    connection closed) before it was answered: its outcome is unknown; read the state to learn it";

/// Runs `work` once per `scope` and `key` in `store`: the first time it runs, and its answer is
/// kept as `keep` encodes it (`None`: not kept, so a retry runs it again); a retry with the same
/// fingerprint waits while the first runs, then gets the kept bytes; the same key with another
/// fingerprint is [`Once::Mismatch`]. `work` is not polled unless it runs. A run whose caller
/// stops waiting (its connection closed, so its handler was dropped) keeps `interrupted` as its
/// answer (an error saying [`INTERRUPTED`]): a retry gets it, rather than waiting for an answer
/// that will never come or running the mutation a second time.
pub(crate) async fn once<A>(
    store: &IdempotencyStore,
    scope: &str,
    key: &str,
    print: &Fingerprint,
    work: impl Future<Output = A>,
    keep: impl FnOnce(&A) -> Option<Vec<u8>>,
    interrupted: Vec<u8>,
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
    let mut running = Running {
        store,
        scope,
        key,
        interrupted: Some(interrupted),
    };
    let answer = work.await;
    // Finished: its own answer is kept below.
    running.interrupted = None;
    drop(running);
    match keep(&answer) {
        Some(bytes) => store.complete(scope, key, &bytes),
        None => store.abandon(scope, key),
    }
    Once::Ran(answer)
}

/// A key admitted to run, answered `interrupted` if its run is dropped unfinished (`None` once
/// it finished).
struct Running<'a> {
    store: &'a IdempotencyStore,
    scope: &'a str,
    key: &'a str,
    interrupted: Option<Vec<u8>>,
}

impl Drop for Running<'_> {
    fn drop(&mut self) {
        if let Some(interrupted) = self.interrupted.take() {
            self.store.complete(self.scope, self.key, &interrupted);
        }
    }
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

#[cfg(test)]
mod tests {
    use std::future::Future;
    use std::sync::Arc;
    use std::task::{Context, Waker};
    use std::time::Duration;

    use agentwire_runtime::{IdempotencyLimits, IdempotencyStore, SystemClock, fingerprint};

    use super::{Once, once};

    /// A run dropped before it finished (its connection closed) is answered as interrupted: a
    /// retry with the same key gets that answer, where it would otherwise wait for good, and
    /// does not run the mutation a second time.
    #[tokio::test]
    async fn a_run_dropped_unfinished_is_answered_interrupted() {
        let store = IdempotencyStore::new(IdempotencyLimits::default(), Arc::new(SystemClock));
        let print = fingerprint(&[b"params"]);
        let keep = |answer: &u32| Some(answer.to_be_bytes().to_vec());
        let mut first = Box::pin(once(
            &store,
            "scope",
            "key",
            &print,
            std::future::pending::<u32>(),
            keep,
            b"interrupted".to_vec(),
        ));
        assert!(
            first
                .as_mut()
                .poll(&mut Context::from_waker(Waker::noop()))
                .is_pending()
        );
        drop(first);
        let retry = tokio::time::timeout(
            Duration::from_secs(10),
            once(
                &store,
                "scope",
                "key",
                &print,
                async { 7 },
                keep,
                b"interrupted".to_vec(),
            ),
        )
        .await
        .expect("the retry waited for a run that was dropped");
        assert!(matches!(retry, Once::Replayed(bytes) if &*bytes == b"interrupted"));
        // A run that finishes keeps its own answer.
        let ran = once(
            &store,
            "scope",
            "other",
            &print,
            async { 7 },
            keep,
            Vec::new(),
        )
        .await;
        assert!(matches!(ran, Once::Ran(7)));
        let replayed = once(
            &store,
            "scope",
            "other",
            &print,
            async { 8 },
            keep,
            Vec::new(),
        )
        .await;
        assert!(matches!(replayed, Once::Replayed(bytes) if *bytes == 7u32.to_be_bytes()));
    }
}
