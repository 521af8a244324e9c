//! The `runtime.event` envelopes of a resume replay, written as bytes from the stored view of
//! each event: what is the same for every event of the replay (version, runtime instance,
//! thread, the cursors' log) is written once, each stored field is copied as it is stored, and
//! only the sequence, the timestamp, the event id and the cursor are written per event. The
//! bytes are those `serde_json` writes for the [`DurableEnvelope`](super::DurableEnvelope) of
//! the event's decode (the tests hold every viewed kind to it on every version).

use std::fmt::Write as _;

use agentwire_roll::ProtocolVersion;
use agentwire_roll::cursor::CursorWriter;
use agentwire_runtime::event::view::{EventView, OperationView, Raw, StoredView};

use super::Timestamp;

/// Writes the envelopes of one thread's replay to one connection.
#[derive(Debug)]
pub struct ReplayWriter {
    version: ProtocolVersion,
    /// `{"protocolVersion":…,"runtimeInstanceId":…,"sequence":`.
    head: Vec<u8>,
    /// `,"threadId":…`.
    thread: Vec<u8>,
    /// On versions with durable events.
    cursors: Option<CursorWriter>,
    /// The last timestamp written, and its text (a burst of events shares its millisecond).
    last_stamp: Option<(u64, String)>,
}

impl ReplayWriter {
    /// The writer of `version`'s envelopes for thread `thread_id` of runtime instance
    /// `runtime_instance_id`; `cursors` mints the cursor fields, which only versions with
    /// durable events carry.
    pub fn new(
        version: ProtocolVersion,
        runtime_instance_id: &str,
        thread_id: &str,
        cursors: CursorWriter,
    ) -> ReplayWriter {
        let mut head = br#"{"protocolVersion":"#.to_vec();
        push_str(&mut head, version.as_str());
        head.extend_from_slice(br#","runtimeInstanceId":"#);
        push_str(&mut head, runtime_instance_id);
        head.extend_from_slice(br#","sequence":"#);
        let mut thread = br#","threadId":"#.to_vec();
        push_str(&mut thread, thread_id);
        ReplayWriter {
            version,
            head,
            thread,
            cursors: version.capabilities().durable_events.then_some(cursors),
            last_stamp: None,
        }
    }

    /// Appends the envelope of the stored event `view`, at position `ordinal` of the thread's
    /// timeline, with the connection's `sequence`.
    ///
    /// # Errors
    /// When the stamp has no RFC 3339 form (a time past the year 9999).
    pub fn write(
        &mut self,
        out: &mut Vec<u8>,
        sequence: u64,
        ordinal: u64,
        view: &StoredView<'_>,
    ) -> Result<(), std::fmt::Error> {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(itoa::Buffer::new().format(sequence).as_bytes());
        out.extend_from_slice(br#","timestamp":""#);
        out.extend_from_slice(self.timestamp(view.at_ms)?.as_bytes());
        out.push(b'"');
        out.extend_from_slice(&self.thread);
        if let Some(turn_id) = view.event.turn_id() {
            member(out, br#","turnId":"#, turn_id);
        }
        out.extend_from_slice(br#","event":"#);
        self.write_event(out, &view.event);
        if let Some(cursors) = &self.cursors {
            let event_id = cursors.event_id(ordinal);
            out.extend_from_slice(br#","durability":"durable","eventId":""#);
            out.extend_from_slice(&event_id);
            out.extend_from_slice(br#"","cursor":""#);
            cursors.push_cursor(out, ordinal, &event_id);
            out.push(b'"');
        }
        out.push(b'}');
        Ok(())
    }

    fn timestamp(&mut self, at_ms: u64) -> Result<&str, std::fmt::Error> {
        if self.last_stamp.as_ref().is_none_or(|(at, _)| *at != at_ms) {
            let mut text = String::with_capacity(24);
            write!(text, "{}", Timestamp(at_ms))?;
            self.last_stamp = Some((at_ms, text));
        }
        Ok(self.last_stamp.as_ref().map_or("", |(_, text)| text))
    }

    /// The Roll event of `event` (as [`super::DurableEvent`] writes it, projected to the
    /// version).
    fn write_event(&self, out: &mut Vec<u8>, event: &EventView<'_>) {
        match event {
            EventView::TurnStarted { .. } => out.extend_from_slice(br#"{"type":"turn.started"}"#),
            EventView::MessageCompleted {
                stream_id, text, ..
            } => {
                out.extend_from_slice(br#"{"type":"message.completed""#);
                member(out, br#","streamId":"#, *stream_id);
                member(out, br#","text":"#, *text);
                out.push(b'}');
            }
            EventView::OperationCompleted { operation, .. } => self.write_tool(out, operation),
            EventView::TurnCompleted { .. } => {
                out.extend_from_slice(br#"{"type":"turn.completed"}"#);
            }
            EventView::TurnCancelled {
                reason, message, ..
            } => {
                out.extend_from_slice(br#"{"type":"turn.cancelled""#);
                member(out, br#","reason":"#, *reason);
                member(out, br#","message":"#, *message);
                out.push(b'}');
            }
            EventView::TurnFailed { stage, message, .. } => {
                out.extend_from_slice(br#"{"type":"turn.failed""#);
                member(out, br#","stage":"#, *stage);
                member(out, br#","message":"#, *message);
                out.push(b'}');
            }
            EventView::CapabilitiesChanged => {
                out.extend_from_slice(br#"{"type":"capabilities.changed"}"#);
            }
        }
    }

    /// `tool.completed`: `appOutput` on 1.5 only (`not_provided` when the tool declared none).
    fn write_tool(&self, out: &mut Vec<u8>, operation: &OperationView<'_>) {
        out.extend_from_slice(br#"{"type":"tool.completed""#);
        member(out, br#","toolCallId":"#, operation.tool_call_id);
        member(out, br#","agentName":"#, operation.agent_name);
        member(out, br#","toolName":"#, operation.tool_name);
        member(out, br#","operationId":"#, operation.id);
        member(out, br#","outcome":{"kind":"#, operation.outcome.kind);
        if let Some(reason) = operation.outcome.reason {
            member(out, br#","reason":"#, reason);
        }
        out.push(b'}');
        member(out, br#","display":"#, operation.display);
        if self.version >= ProtocolVersion::V1_5 {
            match operation.app_output_descriptor() {
                Some(descriptor) => member(out, br#","appOutput":"#, descriptor),
                None => out.extend_from_slice(br#","appOutput":{"status":"not_provided"}"#),
            }
        }
        out.push(b'}');
    }
}

/// Appends `key` (the member's separator, name and colon) and the stored value.
fn member(out: &mut Vec<u8>, key: &[u8], value: Raw<'_>) {
    out.extend_from_slice(key);
    out.extend_from_slice(value.get().as_bytes());
}

fn push_str(out: &mut Vec<u8>, text: &str) {
    // Writing a string into a vector cannot fail.
    let _ = serde_json::to_writer(out, text);
}

#[cfg(test)]
mod tests {
    use agentwire_roll::cursor::{CursorKey, CursorWriter};
    use agentwire_runtime::event::view::StoredView;
    use agentwire_runtime::{StampedEvent, ThreadEvent};

    use super::super::durable::tests::stored_events;
    use super::super::{DurableEnvelope, Timestamp, durable_event};
    use super::ReplayWriter;

    /// A stored event read through its view is written as the bytes `serde_json` writes for
    /// the envelope of its decode, on every version, also when the timestamp changes from one
    /// event to the next or stays; the kinds the view does not read are the ones replay
    /// decodes.
    #[test]
    fn viewed_events_are_written_as_their_decode_is_serialized() {
        let key = CursorKey::new(b"replay key");
        let log_id = [7; 16];
        let mut events = stored_events();
        events.push(ThreadEvent::MessageCompleted {
            turn_id: "t \"2\"".into(),
            stream_id: "s\u{1}".into(),
            text: "line\nbreak é 😀 \\ </script>".into(),
        });
        for version in agentwire_roll::SUPPORTED_VERSIONS {
            let mut writer =
                ReplayWriter::new(version, "r\"1", "th\n1", CursorWriter::new(&key, log_id));
            let mut viewed = 0;
            for (index, event) in events.iter().enumerate() {
                let at_ms = 1_764_590_400_000 + (index as u64 / 3);
                let payload = serde_json::to_vec(&StampedEvent {
                    at_ms,
                    event: event.clone(),
                })
                .unwrap();
                let Some(view) = StoredView::parse(&payload) else {
                    assert!(
                        matches!(
                            event,
                            ThreadEvent::InteractionOpened { .. }
                                | ThreadEvent::InteractionResolved { .. }
                        ),
                        "{} is not viewed",
                        event.kind()
                    );
                    continue;
                };
                viewed += 1;
                let ordinal = 10 + index as u64;
                let sequence = 1_000 + index as u64;
                let decoded = durable_event(event)
                    .and_then(|wire| wire.project(version))
                    .map(|wire| {
                        serde_json::to_string(&DurableEnvelope {
                            protocol_version: version.as_str(),
                            runtime_instance_id: "r\"1",
                            sequence,
                            timestamp: Timestamp(at_ms),
                            thread_id: "th\n1",
                            turn_id: event.turn_id(),
                            event: wire,
                            cursor: version
                                .capabilities()
                                .durable_events
                                .then(|| key.mint(log_id, ordinal)),
                        })
                        .unwrap()
                    })
                    .expect("every viewed kind has a Roll form on every version");
                let mut out = b"[".to_vec();
                writer.write(&mut out, sequence, ordinal, &view).unwrap();
                assert_eq!(
                    String::from_utf8(out[1..].to_vec()).unwrap(),
                    decoded,
                    "{} on {version}",
                    event.kind()
                );
            }
            assert_eq!(viewed, events.len() - 2, "{version}");
        }
    }
}
