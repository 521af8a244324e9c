//! A borrowed view of a stored event: the fields a face puts on its wire, each as the JSON
//! text it is stored as, so the face copies them without decoding and re-escaping them (the
//! replay of a resume sends every event of a thread this way).
//!
//! The view reads the runtime's own writes ([`StampedEvent`](super::StampedEvent) serialized
//! by `serde_json`), so a string's stored text is the text `serde_json` writes for it again.
//! It covers the timeline events a wire sends most (turns, messages, operations, capability
//! changes); for every other kind, and for any payload it cannot read, [`StoredView::parse`]
//! answers `None` and the caller decodes the owned event, which stays the source of truth
//! (the tests hold the view to it field by field).

use std::borrow::Cow;

use serde::Deserialize;
use serde_json::value::RawValue;

use super::{FailStage, OutcomeKind};

/// The JSON text of one stored value, borrowed from the payload.
pub type Raw<'a> = &'a RawValue;

/// A stored event's stamp and its wire fields.
#[derive(Debug)]
pub struct StoredView<'a> {
    /// When the runtime produced the event (milliseconds since the Unix epoch).
    pub at_ms: u64,
    /// The event.
    pub event: EventView<'a>,
}

/// The fields of a timeline event, as stored JSON text. Variants and fields are those of
/// [`ThreadEvent`](super::ThreadEvent) of the same name.
#[derive(Debug)]
pub enum EventView<'a> {
    /// `turn.started` (its input is not part of the view).
    TurnStarted { turn_id: Raw<'a> },
    /// `message.completed`.
    MessageCompleted {
        turn_id: Raw<'a>,
        stream_id: Raw<'a>,
        text: Raw<'a>,
    },
    /// `operation.completed`.
    OperationCompleted {
        turn_id: Raw<'a>,
        operation: OperationView<'a>,
    },
    /// `turn.completed`.
    TurnCompleted { turn_id: Raw<'a> },
    /// `turn.cancelled`.
    TurnCancelled {
        turn_id: Raw<'a>,
        reason: Raw<'a>,
        message: Raw<'a>,
    },
    /// `turn.failed`.
    TurnFailed {
        turn_id: Raw<'a>,
        stage: Raw<'a>,
        message: Raw<'a>,
    },
    /// `capabilities.changed`.
    CapabilitiesChanged,
}

impl<'a> EventView<'a> {
    /// The turn the event belongs to, if any.
    pub fn turn_id(&self) -> Option<Raw<'a>> {
        match self {
            EventView::TurnStarted { turn_id }
            | EventView::MessageCompleted { turn_id, .. }
            | EventView::OperationCompleted { turn_id, .. }
            | EventView::TurnCompleted { turn_id }
            | EventView::TurnCancelled { turn_id, .. }
            | EventView::TurnFailed { turn_id, .. } => Some(turn_id),
            EventView::CapabilitiesChanged => None,
        }
    }
}

/// The fields of a completed [`Operation`](super::Operation), as stored JSON text (its input
/// is not part of the view).
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct OperationView<'a> {
    /// The operation's id.
    #[serde(borrow)]
    pub id: Raw<'a>,
    /// The agent's id of the tool call.
    #[serde(borrow)]
    pub tool_call_id: Raw<'a>,
    /// The agent that called it.
    #[serde(borrow)]
    pub agent_name: Raw<'a>,
    /// The tool.
    #[serde(borrow)]
    pub tool_name: Raw<'a>,
    /// How it ended.
    #[serde(borrow)]
    pub outcome: OutcomeView<'a>,
    /// What to show.
    #[serde(borrow)]
    pub display: Raw<'a>,
    /// The app-output record, when the tool produced one.
    #[serde(borrow, default)]
    pub app_output: Option<Raw<'a>>,
}

impl<'a> OperationView<'a> {
    /// The app-output record's `descriptor`, when it has one (as
    /// `operation.app_output.get("descriptor")` of the owned event).
    pub fn app_output_descriptor(&self) -> Option<Raw<'a>> {
        #[derive(Deserialize)]
        struct Record<'a> {
            #[serde(borrow, default)]
            descriptor: Option<Raw<'a>>,
        }
        let record = self.app_output?;
        serde_json::from_str::<Record<'a>>(record.get())
            .ok()
            .and_then(|record| record.descriptor)
    }
}

/// A [`ToolOutcome`](super::ToolOutcome), as stored JSON text.
#[derive(Debug, Deserialize)]
pub struct OutcomeView<'a> {
    /// The kind.
    #[serde(borrow)]
    pub kind: Raw<'a>,
    /// Why, for people.
    #[serde(borrow, default)]
    pub reason: Option<Raw<'a>>,
}

/// Every field any viewed kind has; the kind decides which must be there.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Fields<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow, default)]
    turn_id: Option<Raw<'a>>,
    #[serde(borrow, default)]
    stream_id: Option<Raw<'a>>,
    #[serde(borrow, default)]
    text: Option<Raw<'a>>,
    #[serde(borrow, default)]
    operation: Option<OperationView<'a>>,
    #[serde(borrow, default)]
    reason: Option<Raw<'a>>,
    #[serde(borrow, default)]
    message: Option<Raw<'a>>,
    #[serde(borrow, default)]
    stage: Option<Raw<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Stamped<'a> {
    at_ms: u64,
    #[serde(borrow)]
    event: Fields<'a>,
}

impl<'a> StoredView<'a> {
    /// The view of a stored payload, or `None` when the event is not of a viewed kind or the
    /// payload is not one the view reads: a field missing, a string field not a string, an
    /// outcome kind or a stage that is not one of the runtime's (the owned decode then says
    /// what the event is, or why it is not one).
    pub fn parse(payload: &'a [u8]) -> Option<StoredView<'a>> {
        let Stamped { at_ms, event } = serde_json::from_slice(payload).ok()?;
        let turn_id = || string(event.turn_id);
        let event = match event.kind.as_ref() {
            "turn.started" => EventView::TurnStarted {
                turn_id: turn_id()?,
            },
            "message.completed" => EventView::MessageCompleted {
                turn_id: turn_id()?,
                stream_id: string(event.stream_id)?,
                text: string(event.text)?,
            },
            "operation.completed" => EventView::OperationCompleted {
                turn_id: turn_id()?,
                operation: event.operation.filter(OperationView::is_well_typed)?,
            },
            "turn.completed" => EventView::TurnCompleted {
                turn_id: turn_id()?,
            },
            "turn.cancelled" => EventView::TurnCancelled {
                turn_id: turn_id()?,
                reason: string(event.reason)?,
                message: string(event.message)?,
            },
            "turn.failed" => EventView::TurnFailed {
                turn_id: turn_id()?,
                stage: event
                    .stage
                    .filter(|stage| serde_json::from_str::<FailStage>(stage.get()).is_ok())?,
                message: string(event.message)?,
            },
            "capabilities.changed" => EventView::CapabilitiesChanged,
            _ => return None,
        };
        Some(StoredView { at_ms, event })
    }
}

impl OperationView<'_> {
    /// Whether the fields the owned decode types as strings and as an outcome kind are those.
    fn is_well_typed(&self) -> bool {
        [self.id, self.tool_call_id, self.agent_name, self.tool_name]
            .iter()
            .all(|raw| is_string(raw))
            && self.outcome.reason.is_none_or(is_string)
            && serde_json::from_str::<OutcomeKind>(self.outcome.kind.get()).is_ok()
    }
}

fn is_string(raw: &RawValue) -> bool {
    raw.get().starts_with('"')
}

/// The field when it is there and is a string.
fn string(raw: Option<Raw<'_>>) -> Option<Raw<'_>> {
    raw.filter(|raw| is_string(raw))
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::super::decode::tests::every_variant;
    use super::super::{Operation, StampedEvent, ThreadEvent};
    use super::{EventView, Raw, StoredView};

    fn text(raw: Raw<'_>) -> String {
        serde_json::from_str(raw.get()).unwrap()
    }

    fn stored(event: &ThreadEvent) -> Vec<u8> {
        serde_json::to_vec(&StampedEvent {
            at_ms: 42,
            event: event.clone(),
        })
        .unwrap()
    }

    fn same_operation(view: &super::OperationView<'_>, operation: &Operation) {
        assert_eq!(text(view.id), operation.id);
        assert_eq!(text(view.tool_call_id), operation.tool_call_id);
        assert_eq!(text(view.agent_name), operation.agent_name);
        assert_eq!(text(view.tool_name), operation.tool_name);
        assert_eq!(
            serde_json::from_str::<super::OutcomeKind>(view.outcome.kind.get()).unwrap(),
            operation.outcome.kind
        );
        assert_eq!(view.outcome.reason.map(text), operation.outcome.reason);
        assert_eq!(
            serde_json::from_str::<Value>(view.display.get()).unwrap(),
            operation.display
        );
        assert_eq!(
            view.app_output_descriptor()
                .map(|raw| serde_json::from_str::<Value>(raw.get()).unwrap()),
            operation
                .app_output
                .as_ref()
                .and_then(|a| a.get("descriptor"))
                .cloned()
        );
    }

    /// Each viewed field holds the stored text of the owned event's field; other kinds are not
    /// viewed.
    #[test]
    fn the_view_reads_what_the_owned_decode_reads() {
        let mut viewed = 0;
        for event in every_variant() {
            let bytes = stored(&event);
            let view = StoredView::parse(&bytes);
            let Some(view) = view else {
                assert!(
                    matches!(
                        event,
                        ThreadEvent::ThreadCreated { .. }
                            | ThreadEvent::ThreadRenamed { .. }
                            | ThreadEvent::ThreadDeleted
                            | ThreadEvent::TurnStatusChanged { .. }
                            | ThreadEvent::InteractionOpened { .. }
                            | ThreadEvent::InteractionResolved { .. }
                    ),
                    "{} is viewed",
                    event.kind()
                );
                continue;
            };
            viewed += 1;
            assert_eq!(view.at_ms, 42);
            assert_eq!(view.event.turn_id().map(text).as_deref(), event.turn_id());
            match (&view.event, &event) {
                (EventView::TurnStarted { .. }, ThreadEvent::TurnStarted { .. })
                | (EventView::TurnCompleted { .. }, ThreadEvent::TurnCompleted { .. })
                | (EventView::CapabilitiesChanged, ThreadEvent::CapabilitiesChanged) => {}
                (
                    EventView::MessageCompleted {
                        stream_id, text: t, ..
                    },
                    ThreadEvent::MessageCompleted {
                        stream_id: s,
                        text: owned,
                        ..
                    },
                ) => {
                    assert_eq!(&text(stream_id), s);
                    assert_eq!(&text(t), owned);
                }
                (
                    EventView::OperationCompleted { operation, .. },
                    ThreadEvent::OperationCompleted {
                        operation: owned, ..
                    },
                ) => same_operation(operation, owned),
                (
                    EventView::TurnCancelled {
                        reason, message, ..
                    },
                    ThreadEvent::TurnCancelled {
                        reason: r,
                        message: m,
                        ..
                    },
                ) => {
                    assert_eq!(&text(reason), r);
                    assert_eq!(&text(message), m);
                }
                (
                    EventView::TurnFailed { stage, message, .. },
                    ThreadEvent::TurnFailed {
                        stage: s,
                        message: m,
                        ..
                    },
                ) => {
                    assert_eq!(text(stage), s.as_str());
                    assert_eq!(&text(message), m);
                }
                (view, owned) => panic!("{view:?} viewed for {}", owned.kind()),
            }
        }
        assert_eq!(viewed, 7, "every viewed kind is covered");
    }

    /// A string is viewed as the text `serde_json` writes for it, escapes included.
    #[test]
    fn strings_are_viewed_as_written() {
        let message = "quote \" backslash \\ line\nbreak \u{1} é 😀 </script>";
        let event = ThreadEvent::MessageCompleted {
            turn_id: "t".into(),
            stream_id: "s".into(),
            text: message.into(),
        };
        let bytes = stored(&event);
        let view = StoredView::parse(&bytes).unwrap();
        let EventView::MessageCompleted { text: raw, .. } = view.event else {
            panic!("{:?}", view.event)
        };
        assert_eq!(raw.get(), serde_json::to_string(message).unwrap());
    }

    /// What the view cannot read as the owned decode would is not viewed; the owned decode
    /// refuses each of these too.
    #[test]
    fn payloads_the_owned_decode_refuses_are_not_viewed() {
        let operation = |outcome: Value, id: Value| {
            json!({"atMs": 1, "event": {"type": "operation.completed", "turnId": "t",
                "operation": {"id": id, "toolCallId": "c", "agentName": "a", "toolName": "n",
                    "input": {}, "outcome": outcome, "display": {"text": "x"}}}})
        };
        for payload in [
            json!({"atMs": 1, "event": {"type": "turn.completed"}}),
            json!({"atMs": 1, "event": {"type": "turn.completed", "turnId": 5}}),
            json!({"atMs": 1, "event": {"type": "turn.failed", "turnId": "t", "stage": "later",
                "message": "m"}}),
            json!({"atMs": 1, "event": {"type": "message.completed", "turnId": "t",
                "streamId": "s", "text": ["x"]}}),
            json!({"atMs": -1, "event": {"type": "turn.completed", "turnId": "t"}}),
            json!({"event": {"type": "turn.completed", "turnId": "t"}}),
            json!({"atMs": 1, "event": {"type": "turn.exploded", "turnId": "t"}}),
            operation(json!({"kind": "exploded"}), json!("op")),
            operation(json!({"kind": "success", "reason": 7}), json!("op")),
            operation(json!({"kind": "success"}), json!(1)),
            json!([1]),
        ] {
            let bytes = serde_json::to_vec(&payload).unwrap();
            assert!(StoredView::parse(&bytes).is_none(), "{payload}");
            assert!(
                serde_json::from_slice::<StampedEvent>(&bytes).is_err(),
                "{payload}"
            );
        }
        assert!(StoredView::parse(b"{\"atMs\":1,").is_none());
    }
}
