//! Reading one frame from the runtime: bounded by the scenario's deadline and the per-read
//! timeout, each line parsed, validated under the negotiated version (with the issues of the
//! definition its kind names when they say more) and correlated with the request it answers;
//! the failures name the frame and quote it.

use std::time::{Duration, Instant};

use agentwire_jsonrpc::Frame as RawFrame;
use agentwire_roll::schema::SchemaIssue;
use agentwire_roll::{Method, ProtocolVersion, schema};
use serde_json::Value;

use super::{EXCERPT_CHARS, Failure, Frame, INBOUND_FRAME_BUDGET, Wire, cut, excerpt};
/// Issues of one invalid frame named in a message.
const REPORTED_ISSUES: usize = 3;

impl Wire {
    /// What a frame is, for messages.
    fn describe(&self, value: &Value) -> String {
        let method = value.get("method").and_then(Value::as_str);
        let id = value.get("id");
        match (method, id) {
            (Some("runtime.event"), None) => format!(
                "the runtime.event notification ({})",
                value
                    .pointer("/params/event/type")
                    .and_then(Value::as_str)
                    .unwrap_or("no event type")
            ),
            (Some(method), None) => format!("the {method} notification"),
            (Some(method), Some(id)) => format!("the {method} server request (id {id})"),
            (None, Some(id)) => {
                let method = id
                    .as_u64()
                    .and_then(|id| self.pending.get(&id).or_else(|| self.answered.get(&id)));
                match method {
                    Some(method) => format!("the answer to {method} (id {id})"),
                    None => format!("a response with id {id}"),
                }
            }
            (None, None) => "a frame without method or id".to_owned(),
        }
    }

    /// The version a frame is validated under: the answered one for `initialize`'s answer.
    fn version_for(&self, value: &Value) -> ProtocolVersion {
        let is_initialize = value.get("method").is_none()
            && value
                .get("id")
                .and_then(Value::as_u64)
                .and_then(|id| self.pending.get(&id))
                .is_some_and(|m| m == "initialize");
        if is_initialize
            && let Some(version) = value
                .pointer("/result/protocolVersion")
                .and_then(Value::as_str)
                .and_then(ProtocolVersion::parse)
        {
            return version;
        }
        self.version
    }

    /// The issues of an invalid frame against the one definition its kind names (the answer's
    /// result against its method's result, an event against the envelope of its durability, a
    /// server request against its method's), which say more than "matches none of the
    /// alternatives" of the whole message; `None` when that definition holds or is unknown.
    fn precise_issues(&self, version: ProtocolVersion, value: &Value) -> Option<Vec<SchemaIssue>> {
        let method = value.get("method").and_then(Value::as_str);
        let (definition, part, prefix) = match method {
            None if value.get("error").is_some() => ("errorResponse".to_owned(), value, ""),
            None => {
                let method = value
                    .get("id")
                    .and_then(Value::as_u64)
                    .and_then(|id| self.pending.get(&id))
                    .and_then(|m| Method::from_wire(m))?;
                (method.result_definition(), value.get("result")?, "/result")
            }
            Some("runtime.event") => {
                let params = value.get("params")?;
                let definition = match params.get("durability").and_then(Value::as_str) {
                    Some("durable") => "runtimeEventEnvelopeDurable",
                    Some("ephemeral") => "runtimeEventEnvelopeEphemeral",
                    _ => "runtimeEventEnvelope",
                };
                (definition.to_owned(), params, "/params")
            }
            Some("runtime.serverRequest.cancel") => {
                ("serverRequestCancelNotification".to_owned(), value, "")
            }
            Some("approval.request") => ("approvalRequestServerRequest".to_owned(), value, ""),
            Some("userInput.request") => ("userInputRequestServerRequest".to_owned(), value, ""),
            Some(_) => return None,
        };
        let issues = schema::validate_definition(version, &definition, part).err()?;
        if issues
            .iter()
            .any(|i| i.schema_path == format!("/$defs/{definition}"))
        {
            // The version has no such definition.
            return None;
        }
        Some(
            issues
                .into_iter()
                .map(|mut i| {
                    i.instance_path = format!("{prefix}{}", i.instance_path);
                    i
                })
                .collect(),
        )
    }

    async fn ended(&mut self, what: &str) -> Failure {
        drop(self.stdin.take());
        let status = tokio::time::timeout(
            Duration::from_secs(2),
            self.child.shutdown(Duration::from_millis(500)),
        )
        .await;
        let exited = match status {
            Ok(Ok(status)) => format!(" ({status})"),
            _ => String::new(),
        };
        Failure::new(format!(
            "the runtime closed its standard output{exited} while the suite waited for {what}{}",
            self.stderr_note()
        ))
    }

    /// Reads the next frame from the runtime, validated and correlated.
    pub(super) async fn read(&mut self, what: &str) -> Result<Frame, Failure> {
        let left = self.deadline.saturating_duration_since(Instant::now());
        let out_of_time = || {
            Failure::new(format!(
                "the scenario ran out of time while the suite waited for {what}"
            ))
        };
        if left.is_zero() {
            return Err(out_of_time());
        }
        let limit = self.timeout.min(left);
        match self.read_within(limit, what).await? {
            Some(frame) => Ok(frame),
            None if limit < self.timeout => Err(out_of_time()),
            None => Err(Failure::new(format!(
                "timed out: the runtime wrote nothing for {} ms while the suite waited for {what}{}",
                self.timeout.as_millis(),
                self.stderr_note()
            ))),
        }
    }

    /// The next frame if one arrives within `limit`.
    pub(super) async fn read_within(
        &mut self,
        limit: Duration,
        what: &str,
    ) -> Result<Option<Frame>, Failure> {
        let read = tokio::time::timeout(limit, self.reader.next_frame()).await;
        let line = match read {
            Err(_) => return Ok(None),
            Ok(Err(error)) => {
                return Err(Failure::new(format!(
                    "reading the runtime's output failed ({error}) while the suite waited for {what}"
                )));
            }
            Ok(Ok(None)) => return Err(self.ended(what).await),
            Ok(Ok(Some(RawFrame::Oversize { length }))) => {
                self.frames_read += 1;
                return Err(Failure::new(format!(
                    "frame {} is a line of {length} bytes, over the suite's inbound budget of {INBOUND_FRAME_BUDGET} bytes",
                    self.frames_read
                )));
            }
            Ok(Ok(Some(RawFrame::Line(bytes)))) => bytes.to_vec(),
        };
        self.frames_read += 1;
        let index = self.frames_read;
        let value: Value = serde_json::from_slice(&line).map_err(|error| {
            Failure::new(format!(
                "frame {index} is not JSON ({error}): {}",
                cut(&String::from_utf8_lossy(&line), EXCERPT_CHARS)
            ))
        })?;
        let version = self.version_for(&value);
        if let Err(issues) = schema::validate_message(version, &value) {
            let issues = self.precise_issues(version, &value).unwrap_or(issues);
            let listed: Vec<String> = issues
                .iter()
                .take(REPORTED_ISSUES)
                .map(|i| {
                    let at = if i.instance_path.is_empty() {
                        "/"
                    } else {
                        &i.instance_path
                    };
                    format!("at {at}: {}", i.message)
                })
                .collect();
            return Err(Failure::new(format!(
                "frame {index}, {}, is invalid under {version}: {}; the frame: {}",
                self.describe(&value),
                listed.join("; "),
                excerpt(&value)
            )));
        }
        if value.get("method").is_none() {
            let id = value.get("id").unwrap_or(&Value::Null);
            let Some(number) = id.as_u64().filter(|id| self.pending.contains_key(id)) else {
                let why = if id.is_null() {
                    "an error response with id null, which no request can be matched with"
                        .to_owned()
                } else if id
                    .as_u64()
                    .is_some_and(|id| self.answered.contains_key(&id))
                {
                    format!("a second answer to {}", self.describe(&value))
                } else {
                    format!("a response to id {id}, which the suite never sent")
                };
                return Err(Failure::new(format!(
                    "frame {index} is {why}: {}",
                    excerpt(&value)
                )));
            };
            if let Some(method) = self.pending.remove(&number) {
                self.answered.insert(number, method);
            }
        }
        Ok(Some(Frame {
            index,
            value,
            bytes: line.len(),
        }))
    }
}
