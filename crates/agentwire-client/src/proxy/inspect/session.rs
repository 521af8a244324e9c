//! The session state and what a frame's place in it says: the requests each side sent and
//! not yet answered (bounded, oldest forgotten first), the version and frame limit learned from
//! the `initialize` pair, and the direction, correlation, negotiation and frame-limit checks
//! made as each frame is observed.

use std::collections::{HashMap, VecDeque};
use std::sync::Mutex;

use agentwire_roll::{LATEST_VERSION, Method, ProtocolVersion, ServerRequestMethod};
use serde_json::Value;

use super::{
    Direction, FrameInfo, FrameKind, MAX_PENDING_REQUESTS, MAX_REMEMBERED_BYTES, Violation,
    ViolationKind,
};
use crate::proxy::lock;
/// The requests one side sent and the other has not answered yet, by id.
#[derive(Debug, Default)]
struct Pending {
    methods: HashMap<String, String>,
    order: VecDeque<String>,
    /// Some request was forgotten to stay bounded: an unknown id may be its answer.
    forgot: bool,
}

impl Pending {
    fn insert(&mut self, key: String, method: String) {
        if key.len() > MAX_REMEMBERED_BYTES || method.len() > MAX_REMEMBERED_BYTES {
            self.forgot = true;
            return;
        }
        if self.methods.insert(key.clone(), method).is_none() {
            self.order.push_back(key);
        }
        while self.order.len() > MAX_PENDING_REQUESTS {
            if let Some(old) = self.order.pop_front() {
                self.methods.remove(&old);
                self.forgot = true;
            }
        }
    }

    fn take(&mut self, key: &str) -> Option<String> {
        let method = self.methods.remove(key)?;
        if let Some(at) = self.order.iter().position(|k| k == key) {
            self.order.remove(at);
        }
        Some(method)
    }
}

#[derive(Debug, Default)]
struct State {
    version: Option<ProtocolVersion>,
    /// The id of the `initialize` request waiting for its answer, and what it offered.
    initialize: Option<(String, Vec<String>)>,
    /// The runtime's `limits.maxFrameBytes`.
    max_frame_bytes: Option<u64>,
    /// Indexed by the direction the request travelled.
    pending: [Pending; 2],
}

/// One session as the proxy sees it, shared by both directions.
#[derive(Debug, Default)]
pub struct Session {
    state: Mutex<State>,
}

fn id_key(id: &Value) -> String {
    serde_json::to_string(id).unwrap_or_default()
}

impl Session {
    /// A session before `initialize`.
    pub fn new() -> Session {
        Session::default()
    }

    /// The negotiated version, once an `initialize` result named one.
    pub fn version(&self) -> Option<ProtocolVersion> {
        lock(&self.state).version
    }

    /// Updates the session with one parsed frame of `length` bytes: remembers requests, names
    /// responses by the method they answer, learns the version from the `initialize` pair.
    /// Returns the frame's description, the version to check it against, and what is wrong
    /// with its place in the session (direction, correlation, negotiation, frame limit).
    pub fn observe(
        &self,
        direction: Direction,
        frame: &Value,
        length: usize,
    ) -> (FrameInfo, ProtocolVersion, Vec<Violation>) {
        let mut info = FrameInfo::of(frame);
        let mut violations = Vec::new();
        let mut state = lock(&self.state);
        match info.kind {
            FrameKind::Request => {
                let method = info.method.clone().unwrap_or_default();
                if let Some(id) = &info.id {
                    state.pending[direction.index()].insert(id_key(id), method.clone());
                    if direction == Direction::HostToRuntime
                        && method == Method::Initialize.as_str()
                        && state.version.is_none()
                    {
                        let offered = frame
                            .pointer("/params/protocolVersions")
                            .and_then(Value::as_array)
                            .map(|versions| {
                                versions
                                    .iter()
                                    .filter_map(Value::as_str)
                                    .map(str::to_owned)
                                    .collect()
                            })
                            .unwrap_or_default();
                        state.initialize = Some((id_key(id), offered));
                    }
                }
                violations.extend(request_direction(direction, &method));
            }
            FrameKind::Notification => {
                if direction == Direction::HostToRuntime {
                    violations.push(Violation::new(
                        ViolationKind::Direction,
                        format!(
                            "the host sent the notification {}; only the runtime sends notifications",
                            info.method.as_deref().unwrap_or_default()
                        ),
                    ));
                }
            }
            FrameKind::Result | FrameKind::Error => {
                let id = info.id.clone().unwrap_or(Value::Null);
                let key = id_key(&id);
                let pending = &mut state.pending[direction.reverse().index()];
                info.method = pending.take(&key);
                if info.method.is_none() && !id.is_null() && !pending.forgot {
                    violations.push(Violation::new(
                        ViolationKind::UnmatchedResponse,
                        format!(
                            "a response with id {key}, which no request of the {} had",
                            match direction {
                                Direction::HostToRuntime => "runtime",
                                Direction::RuntimeToHost => "host",
                            }
                        ),
                    ));
                }
                let answers_initialize = direction == Direction::RuntimeToHost
                    && state.initialize.as_ref().is_some_and(|(k, _)| *k == key);
                if answers_initialize
                    && let Some((_, offered)) = state.initialize.take()
                    && info.kind == FrameKind::Result
                {
                    violations.extend(learn(&mut state, frame, &offered));
                }
            }
            FrameKind::Other => {}
        }
        if direction == Direction::HostToRuntime
            && let Some(limit) = state.max_frame_bytes
            && length as u64 > limit
        {
            violations.push(Violation::new(
                ViolationKind::FrameOverLimit,
                format!(
                    "a frame of {length} bytes, over the runtime's limits.maxFrameBytes of {limit}"
                ),
            ));
        }
        let version = state.version.unwrap_or(LATEST_VERSION);
        (info, version, violations)
    }
}

/// A request its sender may not send.
fn request_direction(direction: Direction, method: &str) -> Option<Violation> {
    let (wrong, whose) = match direction {
        Direction::HostToRuntime => (ServerRequestMethod::from_wire(method).is_some(), "runtime"),
        Direction::RuntimeToHost => (Method::from_wire(method).is_some(), "host"),
    };
    wrong.then(|| {
        Violation::new(
            ViolationKind::Direction,
            format!(
                "{method} is a request of the {whose}, sent here by the {}",
                match direction {
                    Direction::HostToRuntime => "host",
                    Direction::RuntimeToHost => "runtime",
                }
            ),
        )
    })
}

/// Takes the version and frame limit from an `initialize` result.
fn learn(state: &mut State, frame: &Value, offered: &[String]) -> Option<Violation> {
    state.max_frame_bytes = frame
        .pointer("/result/limits/maxFrameBytes")
        .and_then(Value::as_u64);
    let answered = frame.pointer("/result/protocolVersion");
    let Some(version) = answered
        .and_then(Value::as_str)
        .and_then(ProtocolVersion::parse)
    else {
        return Some(Violation::new(
            ViolationKind::Version,
            format!(
                "initialize answered protocolVersion {}, which is no version of the protocol",
                answered.map_or_else(|| "(none)".to_owned(), Value::to_string)
            ),
        ));
    };
    state.version = Some(version);
    if !offered.is_empty() && !offered.iter().any(|o| o == version.as_str()) {
        return Some(Violation::new(
            ViolationKind::Version,
            format!(
                "initialize answered {version}, which the host did not offer ({})",
                offered.join(", ")
            ),
        ));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn pending_requests_are_bounded() {
        let session = Session::new();
        for id in 0..(MAX_PENDING_REQUESTS + 10) {
            let request =
                json!({"jsonrpc": "2.0", "id": id, "method": "thread.list", "params": {}});
            session.observe(Direction::HostToRuntime, &request, 10);
        }
        let long = json!({"jsonrpc": "2.0", "id": "x".repeat(MAX_REMEMBERED_BYTES),
            "method": "thread.list", "params": {}});
        session.observe(Direction::RuntimeToHost, &long, 10);
        let state = lock(&session.state);
        assert_eq!(state.pending[0].methods.len(), MAX_PENDING_REQUESTS);
        assert!(state.pending[0].forgot);
        assert!(state.pending[1].methods.is_empty());
        assert!(state.pending[1].forgot);
    }
}
