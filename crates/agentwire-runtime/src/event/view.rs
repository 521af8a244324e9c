//! A borrowed view of a stored event: the core event's own fields, each as the JSON text it is
//! stored as, so a face that sends stored events again copies them without decoding and
//! re-escaping them (the Roll face's resume replay sends every event of a thread this way).
//!
//! The view reads the runtime's own writes ([`StampedEvent`](super::StampedEvent) serialized
//! by `serde_json`), so a string's stored text is the text `serde_json` writes for it again.
//! It covers the timeline events a wire sends most (turns, messages, operations, capability
//! changes). The payload is read by the byte scanners of `agentwire-jsonscan`: one UTF-8 check,
//! then each member's extent, nothing decoded but the stamp. It holds the owned decode's field
//! rules (required fields, no unknown or repeated field, string fields strings, known outcome
//! kinds and stages); for every other kind, and for any payload it cannot read by them,
//! [`StoredView::parse`] answers `None` and the caller decodes the owned event, which stays the
//! source of truth (the tests hold the view to it field by field).

use agentwire_jsonscan::{skip_ws, string_end, value_end};

use super::{FailStage, OutcomeKind, TurnInput};

/// Nesting the view reads inside a stored value (the owned decode allows 128 levels in all).
const DEPTH: usize = 120;

/// The JSON text of one stored value, borrowed from the payload: well formed (as the scanner
/// checks it) and UTF-8.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Raw<'a>(&'a str);

impl<'a> Raw<'a> {
    /// The value's JSON text.
    pub fn get(&self) -> &'a str {
        self.0
    }

    fn is_string(&self) -> bool {
        self.0.starts_with('"')
    }

    fn is_null(&self) -> bool {
        self.0 == "null"
    }
}

/// A stored event's stamp and its fields.
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
            | EventView::TurnFailed { turn_id, .. } => Some(*turn_id),
            EventView::CapabilitiesChanged => None,
        }
    }
}

/// The fields of a completed [`Operation`](super::Operation), as stored JSON text (its input
/// is not part of the view).
#[derive(Debug)]
pub struct OperationView<'a> {
    /// The operation's id.
    pub id: Raw<'a>,
    /// The agent's id of the tool call.
    pub tool_call_id: Raw<'a>,
    /// The agent that called it.
    pub agent_name: Raw<'a>,
    /// The tool.
    pub tool_name: Raw<'a>,
    /// How it ended.
    pub outcome: OutcomeView<'a>,
    /// What to show.
    pub display: Raw<'a>,
    /// The app-output record, when the tool produced one.
    pub app_output: Option<Raw<'a>>,
}

impl<'a> OperationView<'a> {
    /// The app-output record's `descriptor`, when it has one (as
    /// `operation.app_output.get("descriptor")` of the owned event: the last one of that name).
    pub fn app_output_descriptor(&self) -> Option<Raw<'a>> {
        let record = self.app_output?.0;
        let mut descriptor = None;
        members(record, 0, |key, start| {
            let (value, end) = value(record, start)?;
            if key == b"descriptor" {
                descriptor = Some(value);
            }
            Some(end)
        })?;
        descriptor
    }
}

/// A [`ToolOutcome`](super::ToolOutcome), as stored JSON text.
#[derive(Debug)]
pub struct OutcomeView<'a> {
    /// The kind.
    pub kind: Raw<'a>,
    /// Why, for people.
    pub reason: Option<Raw<'a>>,
}

impl<'a> StoredView<'a> {
    /// The view of a stored payload, or `None` when the event is not of a viewed kind or the
    /// payload is not one the view reads: not UTF-8 or not JSON, a field missing, unknown or
    /// repeated, a string field not a string, an outcome kind or a stage that is not one of
    /// the runtime's (the owned decode then says what the event is, or why it is not one).
    pub fn parse(payload: &'a [u8]) -> Option<StoredView<'a>> {
        let text = std::str::from_utf8(payload).ok()?;
        let (mut at_ms, mut event) = (None, None);
        let end = members(text, skip_ws(payload, 0), |key, start| match key {
            b"atMs" => take(&mut at_ms, text, start),
            b"event" => {
                let (view, end) = EventView::parse(text, start)?;
                event.replace(view).is_none().then_some(end)
            }
            _ => None,
        })?;
        if skip_ws(payload, end) != payload.len() {
            return None;
        }
        Some(StoredView {
            at_ms: plain_u64(at_ms?.0)?,
            event: event?,
        })
    }
}

/// The members an event of a viewed kind may have, one bit each.
const TURN_ID: u8 = 1;
const STREAM_ID: u8 = 1 << 1;
const TEXT: u8 = 1 << 2;
const OPERATION: u8 = 1 << 3;
const REASON: u8 = 1 << 4;
const MESSAGE: u8 = 1 << 5;
const STAGE: u8 = 1 << 6;
const INPUT: u8 = 1 << 7;

impl<'a> EventView<'a> {
    /// The event whose object starts at `start` of `text`, and where the object ends.
    fn parse(text: &'a str, start: usize) -> Option<(EventView<'a>, usize)> {
        let mut kind = None;
        let mut operation = None;
        let mut fields: [Option<Raw<'a>>; 8] = [None; 8];
        let mut present = 0u8;
        let end = members(text, start, |key, start| {
            let bit = match key {
                b"type" => return take(&mut kind, text, start),
                b"turnId" => TURN_ID,
                b"streamId" => STREAM_ID,
                b"text" => TEXT,
                b"operation" => OPERATION,
                b"reason" => REASON,
                b"message" => MESSAGE,
                b"stage" => STAGE,
                b"input" => INPUT,
                _ => return None,
            };
            if present & bit != 0 {
                return None;
            }
            present |= bit;
            if bit == OPERATION {
                let (view, end) = OperationView::parse(text, start)?;
                operation = Some(view);
                return Some(end);
            }
            let (value, end) = value(text, start)?;
            fields[bit.trailing_zeros() as usize] = Some(value);
            Some(end)
        })?;
        let field = |bit: u8| fields[bit.trailing_zeros() as usize];
        let string = |bit: u8| field(bit).filter(Raw::is_string);
        // The kind's own members, exactly (the owned decode refuses unknown ones).
        let exactly = |members: u8| (present == members).then_some(());
        let kind = kind?.0;
        let kind = kind.strip_prefix('"')?.strip_suffix('"')?;
        let turn_id = || string(TURN_ID);
        let event = match kind {
            "turn.started" => {
                exactly(TURN_ID | INPUT)?;
                serde_json::from_str::<TurnInput>(field(INPUT)?.0).ok()?;
                EventView::TurnStarted {
                    turn_id: turn_id()?,
                }
            }
            "message.completed" => {
                exactly(TURN_ID | STREAM_ID | TEXT)?;
                EventView::MessageCompleted {
                    turn_id: turn_id()?,
                    stream_id: string(STREAM_ID)?,
                    text: string(TEXT)?,
                }
            }
            "operation.completed" => {
                exactly(TURN_ID | OPERATION)?;
                EventView::OperationCompleted {
                    turn_id: turn_id()?,
                    operation: operation?,
                }
            }
            "turn.completed" => {
                exactly(TURN_ID)?;
                EventView::TurnCompleted {
                    turn_id: turn_id()?,
                }
            }
            "turn.cancelled" => {
                exactly(TURN_ID | REASON | MESSAGE)?;
                EventView::TurnCancelled {
                    turn_id: turn_id()?,
                    reason: string(REASON)?,
                    message: string(MESSAGE)?,
                }
            }
            "turn.failed" => {
                exactly(TURN_ID | STAGE | MESSAGE)?;
                EventView::TurnFailed {
                    turn_id: turn_id()?,
                    stage: field(STAGE)
                        .filter(|stage| serde_json::from_str::<FailStage>(stage.0).is_ok())?,
                    message: string(MESSAGE)?,
                }
            }
            "capabilities.changed" => {
                exactly(0)?;
                EventView::CapabilitiesChanged
            }
            _ => return None,
        };
        Some((event, end))
    }
}

impl<'a> OperationView<'a> {
    /// The operation whose object starts at `start` of `text`, and where the object ends.
    fn parse(text: &'a str, start: usize) -> Option<(OperationView<'a>, usize)> {
        let mut fields: [Option<Raw<'a>>; 7] = [None; 7];
        let mut outcome = None;
        let end = members(text, start, |key, start| {
            let slot = match key {
                b"id" => 0,
                b"toolCallId" => 1,
                b"agentName" => 2,
                b"toolName" => 3,
                b"display" => 4,
                b"appOutput" => 5,
                b"input" => 6,
                b"outcome" => {
                    let (view, end) = OutcomeView::parse(text, start)?;
                    return outcome.replace(view).is_none().then_some(end);
                }
                _ => return None,
            };
            take(&mut fields[slot], text, start)
        })?;
        fields[6]?;
        let string = |slot: usize| fields[slot].filter(Raw::is_string);
        let operation = OperationView {
            id: string(0)?,
            tool_call_id: string(1)?,
            agent_name: string(2)?,
            tool_name: string(3)?,
            outcome: outcome?,
            display: fields[4]?,
            app_output: fields[5].filter(|record| !record.is_null()),
        };
        Some((operation, end))
    }
}

impl<'a> OutcomeView<'a> {
    /// The outcome whose object starts at `start` of `text`, and where the object ends.
    fn parse(text: &'a str, start: usize) -> Option<(OutcomeView<'a>, usize)> {
        let (mut kind, mut reason) = (None, None);
        let end = members(text, start, |key, start| match key {
            b"kind" => take(&mut kind, text, start),
            b"reason" => take(&mut reason, text, start),
            _ => None,
        })?;
        let kind = kind.filter(|kind| serde_json::from_str::<OutcomeKind>(kind.0).is_ok())?;
        let reason = match reason {
            Some(reason) if reason.is_null() => None,
            Some(reason) if !reason.is_string() => return None,
            reason => reason,
        };
        Some((OutcomeView { kind, reason }, end))
    }
}

/// Sets `slot` to the value at `start` of `text` unless it is set already (a repeated
/// member), and answers where the value ends.
fn take<'a>(slot: &mut Option<Raw<'a>>, text: &'a str, start: usize) -> Option<usize> {
    let (value, end) = value(text, start)?;
    slot.replace(value).is_none().then_some(end)
}

/// The JSON value at `start` of `text`, and where it ends.
fn value(text: &str, start: usize) -> Option<(Raw<'_>, usize)> {
    let end = value_end(text.as_bytes(), start, DEPTH)?;
    // The scanner stops only at ASCII bytes, so both ends are character boundaries.
    Some((Raw(text.get(start..end)?), end))
}

/// Calls `member` with each member of the object at `pos` of `text` (its key's bytes, written
/// without escapes, and where its value starts; `member` answers where the value ends) and
/// answers where the object ends: `None` when there is no object there, it is not JSON, a key
/// has an escape, or `member` answers `None`.
fn members<'a>(
    text: &'a str,
    pos: usize,
    mut member: impl FnMut(&'a [u8], usize) -> Option<usize>,
) -> Option<usize> {
    let b = text.as_bytes();
    if b.get(pos) != Some(&b'{') {
        return None;
    }
    let mut i = skip_ws(b, pos + 1);
    if b.get(i) == Some(&b'}') {
        return Some(i + 1);
    }
    loop {
        let key_end = string_end(b, i)?;
        let key = &b[i + 1..key_end - 1];
        if key.contains(&b'\\') {
            return None;
        }
        i = skip_ws(b, key_end);
        if b.get(i) != Some(&b':') {
            return None;
        }
        let end = member(key, skip_ws(b, i + 1))?;
        i = skip_ws(b, end);
        match *b.get(i)? {
            b',' => i = skip_ws(b, i + 1),
            b'}' => return Some(i + 1),
            _ => return None,
        }
    }
}

/// A `u64` written as plain digits (no sign, fraction, exponent or leading zero).
fn plain_u64(text: &str) -> Option<u64> {
    let b = text.as_bytes();
    if b.is_empty() || !b.iter().all(u8::is_ascii_digit) || (b.len() > 1 && b[0] == b'0') {
        return None;
    }
    text.parse().ok()
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

    /// Each viewed field holds the stored text of `event`'s field.
    fn assert_same(view: &StoredView<'_>, event: &ThreadEvent) {
        assert_eq!(view.event.turn_id().map(text).as_deref(), event.turn_id());
        match (&view.event, event) {
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
                assert_eq!(&text(*stream_id), s);
                assert_eq!(&text(*t), owned);
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
                assert_eq!(&text(*reason), r);
                assert_eq!(&text(*message), m);
            }
            (
                EventView::TurnFailed { stage, message, .. },
                ThreadEvent::TurnFailed {
                    stage: s,
                    message: m,
                    ..
                },
            ) => {
                assert_eq!(text(*stage), s.as_str());
                assert_eq!(&text(*message), m);
            }
            (view, owned) => panic!("{view:?} viewed for {}", owned.kind()),
        }
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
                            | ThreadEvent::ThreadArchived
                            | ThreadEvent::TurnStatusChanged { .. }
                            | ThreadEvent::InteractionOpened { .. }
                            | ThreadEvent::InteractionResolved { .. }
                            | ThreadEvent::HumanTaskOpened { .. }
                            | ThreadEvent::HumanTaskDecided { .. }
                            | ThreadEvent::HumanTaskCancelled { .. }
                            | ThreadEvent::HumanTaskExpired { .. }
                            | ThreadEvent::HumanTaskReissued { .. }
                    ),
                    "{} is viewed",
                    event.kind()
                );
                continue;
            };
            viewed += 1;
            assert_eq!(view.at_ms, 42);
            assert_same(&view, &event);
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
        // What `json!` cannot write: repeated, unknown and missing members, trailing text,
        // escapes in keys and in the tag, text that is not UTF-8.
        let completed = r#""type":"turn.completed","turnId":"t""#;
        let op = |fields: &str| {
            format!(
                r#"{{"atMs":1,"event":{{"type":"operation.completed","turnId":"t","operation":{{{fields}}}}}}}"#
            )
        };
        let whole = r#""id":"o","toolCallId":"c","agentName":"a","toolName":"n","input":{}"#;
        for text in [
            "{\"atMs\":1,".to_owned(),
            format!(r#"{{"atMs":1,"event":{{{completed}}},"extra":1}}"#),
            format!(r#"{{"atMs":1,"atMs":2,"event":{{{completed}}}}}"#),
            format!(r#"{{"atMs":1,"event":{{{completed},"turnId":"u"}}}}"#),
            format!(r#"{{"atMs":1,"event":{{{completed},"extra":1}}}}"#),
            format!(r#"{{"atMs":1,"event":{{{completed},"reason":"r"}}}}"#),
            format!(r#"{{"atMs":1,"event":{{{completed}}}}} x"#),
            format!(r#"{{"atMs":1,"event":{{{completed}}}}}{{}}"#),
            format!(r#"{{"atMs":01,"event":{{{completed}}}}}"#),
            format!(r#"{{"atMs":1.0,"event":{{{completed}}}}}"#),
            format!(r#"{{"atMs":18446744073709551616,"event":{{{completed}}}}}"#),
            r#"{"atMs":1,"event":{"type":"turn.started","turnId":"t"}}"#.to_owned(),
            r#"{"atMs":1,"event":{"type":"turn.started","turnId":"t","input":{"text":5}}}"#
                .to_owned(),
            r#"{"atMs":1,"event":{"type":"capabilities.changed","turnId":"t"}}"#.to_owned(),
            r#"{"atMs":1,"event":{"type":"message.completed","turnId":"t","streamId":"s"}}"#
                .to_owned(),
            op(&format!(r#"{whole},"outcome":{{"kind":"success"}}"#)),
            op(
                r#""id":"o","toolCallId":"c","agentName":"a","toolName":"n","outcome":{"kind":"success"},"display":1"#,
            ),
            op(&format!(
                r#"{whole},"outcome":{{"kind":"success"}},"display":1,"extra":1"#
            )),
            op(&format!(
                r#"{whole},"outcome":{{"kind":"success","extra":1}},"display":1"#
            )),
            op(&format!(
                r#"{whole},"outcome":{{"reason":"r"}},"display":1"#
            )),
            op(&format!(
                r#"{whole},"id":"p","outcome":{{"kind":"success"}},"display":1"#
            )),
            op(&format!(
                r#"{whole},"outcome":{{"kind":"success"}},"display":[1,]"#
            )),
        ] {
            assert!(StoredView::parse(text.as_bytes()).is_none(), "{text}");
            assert!(
                serde_json::from_str::<StampedEvent>(&text).is_err(),
                "{text}"
            );
        }
        // The owned decode reads these; the view leaves them to it.
        for text in [
            r#"{"atMs":1,"event":{"type":"turn.completed","turn\u0049d":"t"}}"#.to_owned(),
            r#"{"atMs":1,"event":{"type":"turn.complete\u0064","turnId":"t"}}"#.to_owned(),
        ] {
            assert!(StoredView::parse(text.as_bytes()).is_none(), "{text}");
            assert!(
                serde_json::from_str::<StampedEvent>(&text).is_ok(),
                "{text}"
            );
        }
        let mut bytes = r#"{"atMs":1,"event":{"type":"message.completed","turnId":"t","streamId":"s","text":"x"}}"#.as_bytes().to_vec();
        let at = bytes.len() - 4;
        bytes[at] = 0xff;
        assert!(StoredView::parse(&bytes).is_none());
        assert!(serde_json::from_slice::<StampedEvent>(&bytes).is_err());
    }

    /// Members in any order, whitespace between tokens and null optional members are read as
    /// the owned decode reads them.
    #[test]
    fn any_member_order_and_whitespace_are_viewed() {
        let text = r#" { "event" : { "operation" : { "appOutput" : null , "display" : { "text" : "x" } ,
            "outcome" : { "reason" : null , "kind" : "success" } , "input" : [ ] , "toolName" : "n" ,
            "agentName" : "a" , "toolCallId" : "c" , "id" : "o" } , "turnId" : "t" ,
            "type" : "operation.completed" } , "atMs" : 7 } "#;
        let owned: StampedEvent = serde_json::from_str(text).unwrap();
        let view = StoredView::parse(text.as_bytes()).expect("viewed");
        assert_eq!(view.at_ms, 7);
        assert_same(&view, &owned.event);
        let EventView::OperationCompleted { operation, .. } = &view.event else {
            panic!("{:?}", view.event)
        };
        assert_eq!(operation.display.get(), r#"{ "text" : "x" }"#);
        assert_eq!(operation.app_output, None);
        assert_eq!(operation.outcome.reason, None);
    }

    /// Whatever a corrupted payload reads as, the view never reads one the owned decode
    /// refuses, and what both read is the same: every payload of the viewed kinds with one
    /// byte deleted, or replaced by a quote, a brace, a comma, a digit or a space.
    #[test]
    fn a_corrupted_payload_is_viewed_only_as_its_decode_reads_it() {
        let mut checked = 0;
        for event in every_variant() {
            let bytes = stored(&event);
            if StoredView::parse(&bytes).is_none() {
                continue;
            }
            for at in 0..bytes.len() {
                let mut variants = vec![[&bytes[..at], &bytes[at + 1..]].concat()];
                for replacement in [b'"', b'}', b',', b'7', b' '] {
                    let mut changed = bytes.clone();
                    changed[at] = replacement;
                    variants.push(changed);
                }
                for changed in variants {
                    let owned = serde_json::from_slice::<StampedEvent>(&changed);
                    if let Some(view) = StoredView::parse(&changed) {
                        let owned = owned.unwrap_or_else(|e| {
                            panic!(
                                "{} viewed, not decoded: {e}",
                                String::from_utf8_lossy(&changed)
                            )
                        });
                        assert_eq!(view.at_ms, owned.at_ms);
                        assert_same(&view, &owned.event);
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked > 4_000, "{checked}");
    }
}
