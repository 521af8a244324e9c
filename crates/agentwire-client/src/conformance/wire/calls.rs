//! Requests and their answers: the answer to one request, calls that must succeed or fail
//! with a given code, `initialize` with its advertisement checked against the suite's inbound
//! budget, and the openings scenarios share (the handshake, `thread.create`, `turn.start`, a
//! turn's events up to its terminal one).

use agentwire_roll::negotiation::check_advertisement;
use agentwire_roll::{ProtocolVersion, RollErrorCode, ServerRequestMethod};
use serde_json::{Value, json};

use super::{
    Answer, Failure, Frame, INBOUND_FRAME_BUDGET, MAX_INBOX_FRAMES, RpcError, Wire, ensure,
    excerpt, is_terminal, uuid,
};
/// The server requests the suite answers, so it may advertise every version (1.1 requires an
/// `approval.request` handler).
const HANDLED: [ServerRequestMethod; 2] = [
    ServerRequestMethod::ApprovalRequest,
    ServerRequestMethod::UserInputRequest,
];

/// What the suite says it is in `initialize`.
fn client_info() -> Value {
    json!({"name": "agentwire-conformance", "version": env!("CARGO_PKG_VERSION")})
}

impl Wire {
    /// The answer to request `id`.
    pub(crate) async fn answer(&mut self, id: u64) -> Result<Answer, Failure> {
        let method = self
            .pending
            .get(&id)
            .or_else(|| self.answered.get(&id))
            .cloned()
            .unwrap_or_default();
        let what = format!("the answer to {method} (id {id})");
        let frame = self.wait_for(&what, |f| f.is_response_to(id)).await?;
        let Frame {
            index,
            mut value,
            bytes,
        } = frame;
        let result = match value.get_mut("error") {
            Some(error) => Err(RpcError::from_value(error.take())),
            None => Ok(value.get_mut("result").map(Value::take).unwrap_or_default()),
        };
        Ok(Answer {
            index,
            bytes,
            result,
        })
    }

    /// Sends a request and waits for its answer.
    pub(crate) async fn call(&mut self, method: &str, params: Value) -> Result<Answer, Failure> {
        let id = self.request(method, params).await?;
        self.answer(id).await
    }

    /// A call that must succeed.
    pub(crate) async fn ok(&mut self, method: &str, params: Value) -> Result<Value, Failure> {
        let shown = excerpt(&params);
        match self.call(method, params).await?.result {
            Ok(result) => Ok(result),
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected a result"
            ))),
        }
    }

    /// A call that must fail with `expected` (its `rollCode` and the JSON-RPC code that goes
    /// with it).
    pub(crate) async fn refused(
        &mut self,
        method: &str,
        params: Value,
        expected: RollErrorCode,
    ) -> Result<RpcError, Failure> {
        let shown = excerpt(&params);
        let wanted = format!("{} ({})", expected.as_str(), expected.jsonrpc_code());
        match self.call(method, params).await?.result {
            Ok(result) => Err(Failure::new(format!(
                "{method} {shown} succeeded with {}; expected {wanted}",
                excerpt(&result)
            ))),
            Err(error)
                if error.roll_code.as_deref() == Some(expected.as_str())
                    && error.code == expected.jsonrpc_code() =>
            {
                Ok(error)
            }
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected {wanted}"
            ))),
        }
    }

    /// A call that must fail with JSON-RPC `code` (whatever its data).
    pub(crate) async fn refused_with_code(
        &mut self,
        method: &str,
        params: Value,
        code: i64,
    ) -> Result<RpcError, Failure> {
        let shown = excerpt(&params);
        match self.call(method, params).await?.result {
            Ok(result) => Err(Failure::new(format!(
                "{method} {shown} succeeded with {}; expected error {code}",
                excerpt(&result)
            ))),
            Err(error) if error.code == code => Ok(error),
            Err(error) => Err(Failure::new(format!(
                "{method} {shown} answered {error}; expected error {code}"
            ))),
        }
    }

    /// `initialize` offering `offered` (checked against the 17 MiB rule first). On success the
    /// answered version becomes the one frames are validated under.
    pub(crate) async fn initialize(&mut self, offered: &[String]) -> Result<Answer, Failure> {
        let budget = u64::try_from(INBOUND_FRAME_BUDGET).unwrap_or(u64::MAX);
        check_advertisement(offered, budget, &HANDLED).map_err(|error| {
            Failure::new(format!(
                "the suite may not offer {offered:?} with its inbound budget of {INBOUND_FRAME_BUDGET} bytes: {error}"
            ))
        })?;
        let answer = self
            .call(
                "initialize",
                json!({"protocolVersions": offered, "client": client_info()}),
            )
            .await?;
        if let Ok(result) = &answer.result
            && let Some(version) = result
                .get("protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse)
        {
            self.version = version;
            self.features = result["features"]
                .as_array()
                .map(|items| {
                    items
                        .iter()
                        .filter_map(|f| f.as_str().map(str::to_owned))
                        .collect()
                })
                .unwrap_or_default();
        }
        Ok(answer)
    }

    /// `initialize` offering only the version under test, then on 1.2+ the capability
    /// handshake with `handlers` (revision 1). Returns the `initialize` result.
    pub(crate) async fn open(&mut self, handlers: &[&str]) -> Result<Value, Failure> {
        let version = self.version;
        let answer = self.initialize(&[version.as_str().to_owned()]).await?;
        let result = answer.result.map_err(|error| {
            Failure::new(format!(
                "initialize offering only {version} answered {error}"
            ))
        })?;
        ensure!(
            result["protocolVersion"] == version.as_str(),
            "initialize offering only {version} answered protocolVersion {}",
            result["protocolVersion"]
        );
        if version.capabilities().server_request_capability_negotiation {
            let ack = self
                .ok(
                    "client.capabilities.set",
                    json!({"revision": 1, "serverRequestMethods": handlers}),
                )
                .await?;
            ensure!(
                ack["revision"] == 1,
                "client.capabilities.set revision 1 was acknowledged as revision {}",
                ack["revision"]
            );
        }
        Ok(result)
    }

    /// `thread.create` with a fresh `requestId`; returns the thread id.
    pub(crate) async fn create_thread(&mut self, title: &str) -> Result<String, Failure> {
        let result = self
            .ok(
                "thread.create",
                json!({"requestId": uuid(), "title": title}),
            )
            .await?;
        result["thread"]["id"]
            .as_str()
            .map(str::to_owned)
            .ok_or_else(|| Failure::new("thread.create answered a thread without an id"))
    }

    /// `turn.start` with fresh ids; returns the turn id.
    pub(crate) async fn start_turn(
        &mut self,
        thread_id: &str,
        text: &str,
    ) -> Result<String, Failure> {
        let turn_id = uuid();
        let result = self
            .ok(
                "turn.start",
                json!({"requestId": uuid(), "threadId": thread_id, "turnId": turn_id,
                       "input": {"text": text}}),
            )
            .await?;
        let expected = json!({"accepted": true, "turnId": turn_id});
        ensure!(
            result == expected,
            "turn.start answered {}; expected {expected}",
            excerpt(&result)
        );
        Ok(turn_id)
    }

    /// The `runtime.event` envelopes of a turn until its terminal event, in order (they are
    /// taken from the unread frames).
    pub(crate) async fn turn_events(
        &mut self,
        thread_id: &str,
        turn_id: &str,
    ) -> Result<Vec<Value>, Failure> {
        let what = format!("the end of turn {turn_id}");
        let mut events = Vec::new();
        loop {
            let frame = self
                .wait_for(&what, |f| {
                    f.event_of(thread_id)
                        .is_some_and(|e| e["turnId"] == turn_id)
                })
                .await?;
            let envelope = frame.params().clone();
            let done = is_terminal(&envelope);
            events.push(envelope);
            if done {
                return Ok(events);
            }
            ensure!(
                events.len() < MAX_INBOX_FRAMES,
                "turn {turn_id} wrote more than {MAX_INBOX_FRAMES} events without ending"
            );
        }
    }
}
