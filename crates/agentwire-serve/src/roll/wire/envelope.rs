//! The one writer of `runtime.event` envelopes, as bytes: what is the same for every event of
//! one connection's version, runtime instance and thread is written once, and per event only
//! the sequence, the timestamp, the turn, the [`RuntimeEvent`] (already projected to the
//! version) and, on versions with durable events, its durability: `durable` with the event id
//! and cursor of its timeline position, or `ephemeral`. Live events, committed ones and a
//! resume's replay all go through it; the tests hold its bytes, for every kind on every
//! version, to `agentwire_roll::project::project_event_envelope` of the 1.5 envelope.

use std::fmt::Write as _;

use agentwire_roll::ProtocolVersion;
use agentwire_roll::cursor::CursorWriter;

use super::Timestamp;
use super::event::{JsonText, RuntimeEvent};

/// Whether an event is kept in the thread's log, and where.
#[derive(Debug, Clone, Copy)]
pub enum Durability<'a> {
    /// A timeline event at position `ordinal`, whose cursor `cursors` mints.
    Durable {
        cursors: &'a CursorWriter,
        ordinal: u64,
    },
    /// A live event, never replayed.
    Ephemeral,
}

/// Writes the envelopes of one thread's events to one connection.
#[derive(Debug)]
pub struct EnvelopeWriter {
    /// `{"protocolVersion":…,"runtimeInstanceId":…,"sequence":`.
    head: Vec<u8>,
    /// `,"threadId":…`.
    thread: Vec<u8>,
    /// Whether the version carries `durability` (and a durable event's `eventId` and `cursor`).
    durability: bool,
    /// The last timestamp written, and its text (a burst of events shares its millisecond).
    last_stamp: Option<(u64, String)>,
}

impl EnvelopeWriter {
    /// The writer of `version`'s envelopes for thread `thread_id` of runtime instance
    /// `runtime_instance_id`.
    pub fn new(
        version: ProtocolVersion,
        runtime_instance_id: &str,
        thread_id: &str,
    ) -> EnvelopeWriter {
        let mut head = br#"{"protocolVersion":"#.to_vec();
        version.as_str().write(&mut head);
        head.extend_from_slice(br#","runtimeInstanceId":"#);
        runtime_instance_id.write(&mut head);
        head.extend_from_slice(br#","sequence":"#);
        let mut thread = br#","threadId":"#.to_vec();
        thread_id.write(&mut thread);
        EnvelopeWriter {
            head,
            thread,
            durability: version.capabilities().durable_events,
            last_stamp: None,
        }
    }

    /// Appends the envelope of `event` (projected to the writer's version) of turn `turn_id`,
    /// produced at `at_ms`, with the connection's `sequence`.
    ///
    /// # Errors
    /// When the stamp has no RFC 3339 form (a time past the year 9999).
    pub fn write<S: JsonText, V: JsonText>(
        &mut self,
        out: &mut Vec<u8>,
        sequence: u64,
        at_ms: u64,
        turn_id: Option<S>,
        event: &RuntimeEvent<S, V>,
        durability: Durability<'_>,
    ) -> Result<(), std::fmt::Error> {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(itoa::Buffer::new().format(sequence).as_bytes());
        out.extend_from_slice(br#","timestamp":""#);
        out.extend_from_slice(self.timestamp(at_ms)?.as_bytes());
        out.push(b'"');
        out.extend_from_slice(&self.thread);
        if let Some(turn_id) = turn_id {
            out.extend_from_slice(br#","turnId":"#);
            turn_id.write(out);
        }
        out.extend_from_slice(br#","event":"#);
        event.write(out);
        if self.durability {
            match durability {
                Durability::Durable { cursors, ordinal } => {
                    let event_id = cursors.event_id(ordinal);
                    out.extend_from_slice(br#","durability":"durable","eventId":""#);
                    out.extend_from_slice(&event_id);
                    out.extend_from_slice(br#"","cursor":""#);
                    cursors.push_cursor(out, ordinal, &event_id);
                    out.push(b'"');
                }
                Durability::Ephemeral => {
                    out.extend_from_slice(br#","durability":"ephemeral""#);
                }
            }
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
}

#[cfg(test)]
mod tests {
    use agentwire_roll::ProtocolVersion;
    use agentwire_roll::cursor::{CursorKey, CursorWriter};
    use agentwire_roll::project::project_event_envelope;
    use agentwire_runtime::StampedEvent;
    use agentwire_runtime::event::view::StoredView;
    use serde_json::{Map, Value, json};

    use super::super::event::tests::{live_events, stored_events};
    use super::super::{durable_event, live_event, stored_event, timestamp};
    use super::{Durability, EnvelopeWriter};

    const INSTANCE: &str = "r\"1";
    const THREAD: &str = "th\n1";

    /// The 1.5 envelope of a Roll event, as a value; `durability` holds the members after the
    /// event.
    fn envelope_1_5(
        sequence: u64,
        at_ms: u64,
        turn_id: Option<&str>,
        event: &Value,
        durability: Map<String, Value>,
    ) -> Value {
        let mut out = Map::new();
        out.insert("protocolVersion".into(), json!("1.5"));
        out.insert("runtimeInstanceId".into(), json!(INSTANCE));
        out.insert("sequence".into(), json!(sequence));
        out.insert("timestamp".into(), json!(timestamp(at_ms)));
        out.insert("threadId".into(), json!(THREAD));
        if let Some(turn_id) = turn_id {
            out.insert("turnId".into(), json!(turn_id));
        }
        out.insert("event".into(), event.clone());
        out.extend(durability);
        Value::Object(out)
    }

    fn members(value: Value) -> Map<String, Value> {
        match value {
            Value::Object(members) => members,
            other => panic!("not an object: {other}"),
        }
    }

    /// What the generic projection makes of the 1.5 envelope on `version`, as text.
    fn projected(envelope: &Value, version: ProtocolVersion) -> Option<String> {
        project_event_envelope(envelope, version)
            .ok()
            .map(|envelope| serde_json::to_string(&envelope).unwrap())
    }

    fn text(out: &[u8]) -> String {
        String::from_utf8(out.to_vec()).unwrap()
    }

    /// Every durable kind, from its decode and, where the stored view reads it, from its
    /// view, is written on every version as `serde_json` writes the generic projection of its
    /// 1.5 envelope; the timestamp changes from one event to the next or stays; strings with
    /// escapes are written escaped from the decode and copied from the view.
    #[test]
    fn durable_envelopes_are_written_as_the_roll_projection_of_their_1_5_form() {
        let key = CursorKey::new(b"replay key");
        let log_id = [7; 16];
        let cursors = CursorWriter::new(&key, log_id);
        let events = stored_events();
        for version in agentwire_roll::SUPPORTED_VERSIONS {
            let mut writer = EnvelopeWriter::new(version, INSTANCE, THREAD);
            let mut viewed = 0;
            for (index, (event, roll)) in events.iter().enumerate() {
                let at_ms = 1_764_590_400_000 + (index as u64 / 3);
                let ordinal = 10 + index as u64;
                let sequence = 1_000 + index as u64;
                let cursor = key.mint(log_id, ordinal);
                let expected = projected(
                    &envelope_1_5(
                        sequence,
                        at_ms,
                        event.turn_id(),
                        roll,
                        members(json!({"durability": "durable",
                                       "eventId": cursor.event_id_text(),
                                       "cursor": cursor.as_str()})),
                    ),
                    version,
                );
                let durable = Durability::Durable {
                    cursors: &cursors,
                    ordinal,
                };

                let decoded = durable_event(event)
                    .expect("every stored kind here has a Roll form")
                    .project(version)
                    .map(|wire| {
                        let mut out = Vec::new();
                        writer
                            .write(&mut out, sequence, at_ms, event.turn_id(), &wire, durable)
                            .unwrap();
                        text(&out)
                    });
                assert_eq!(decoded, expected, "{} decoded on {version}", event.kind());

                let payload = serde_json::to_vec(&StampedEvent {
                    at_ms,
                    event: event.clone(),
                })
                .unwrap();
                let Some(view) = StoredView::parse(&payload) else {
                    assert!(
                        roll["type"] == "approval.required" || roll["type"] == "approval.resolved",
                        "{} is not viewed",
                        event.kind()
                    );
                    continue;
                };
                viewed += 1;
                let wire = stored_event(&view.event)
                    .project(version)
                    .expect("every viewed kind has a Roll form on every version");
                let mut out = Vec::new();
                writer
                    .write(
                        &mut out,
                        sequence,
                        view.at_ms,
                        view.event.turn_id(),
                        &wire,
                        durable,
                    )
                    .unwrap();
                assert_eq!(
                    Some(text(&out)),
                    expected,
                    "{} viewed on {version}",
                    event.kind()
                );
            }
            assert_eq!(viewed, events.len() - 2, "{version}");
        }
    }

    /// Every ephemeral kind is written on every version as `serde_json` writes the generic
    /// projection of its 1.5 envelope (`durability: ephemeral` from 1.3).
    #[test]
    fn live_envelopes_are_written_as_the_roll_projection_of_their_1_5_form() {
        for version in agentwire_roll::SUPPORTED_VERSIONS {
            let mut writer = EnvelopeWriter::new(version, INSTANCE, THREAD);
            for (index, (event, roll)) in live_events().iter().enumerate() {
                let at_ms = 1_764_590_400_000 + (index as u64 / 2);
                let sequence = 7 + index as u64;
                let turn_id = "t \"1\"";
                let expected = projected(
                    &envelope_1_5(
                        sequence,
                        at_ms,
                        Some(turn_id),
                        roll,
                        members(json!({"durability": "ephemeral"})),
                    ),
                    version,
                );
                let wire = live_event(event)
                    .project(version)
                    .expect("every live kind has a Roll form on every version");
                let mut out = Vec::new();
                writer
                    .write(
                        &mut out,
                        sequence,
                        at_ms,
                        Some(turn_id),
                        &wire,
                        Durability::Ephemeral,
                    )
                    .unwrap();
                assert_eq!(Some(text(&out)), expected, "{roll} on {version}");
            }
        }
    }
}
