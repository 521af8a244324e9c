//! Decoding of [`ThreadEvent`] without buffering.
//!
//! A derived internally tagged decoder first copies every field of the object into an
//! intermediate tree (it cannot know the variant before it has seen `type`), then decodes the
//! variant from the copy. The runtime writes `type` first, so this decoder reads the tag, then
//! decodes the variant's fields straight from the rest of the object, through a mirror of the
//! enum that serde derives as externally tagged (`remote`: the compiler holds the mirror's
//! fields to the enum's). An object whose `type` is not first is read into a JSON map and
//! decoded through the same mirror, so the rules are the same either way.

use std::fmt;

use serde::de::value::StrDeserializer;
use serde::de::{
    self, DeserializeSeed, Deserializer, EnumAccess, IgnoredAny, IntoDeserializer, MapAccess,
    VariantAccess, Visitor,
};
use serde::{Deserialize, forward_to_deserialize_any};
use serde_json::Value;

use super::{
    FailStage, HumanTask, Interaction, Operation, Resolution, ThreadEvent, TurnInput, TurnStatus,
};
use crate::decision::{Decision, Via};

/// The variant names, as stored.
const VARIANTS: &[&str] = &[
    "thread.created",
    "thread.renamed",
    "thread.deleted",
    "thread.archived",
    "turn.started",
    "turn.status",
    "message.completed",
    "operation.completed",
    "interaction.opened",
    "interaction.resolved",
    "turn.completed",
    "turn.cancelled",
    "turn.failed",
    "capabilities.changed",
    "human_task.opened",
    "human_task.decided",
    "human_task.cancelled",
    "human_task.expired",
    "human_task.reissued",
];

#[derive(Deserialize)]
#[serde(
    remote = "ThreadEvent",
    rename_all_fields = "camelCase",
    deny_unknown_fields
)]
enum Mirror {
    #[serde(rename = "thread.created")]
    ThreadCreated {
        #[serde(default)]
        title: Option<String>,
        #[serde(default)]
        model: Option<String>,
        #[serde(default)]
        parent_thread_id: Option<String>,
        #[serde(default)]
        alias: Option<String>,
    },
    #[serde(rename = "thread.renamed")]
    ThreadRenamed { title: String },
    #[serde(rename = "thread.deleted")]
    ThreadDeleted,
    #[serde(rename = "thread.archived")]
    ThreadArchived,
    #[serde(rename = "turn.started")]
    TurnStarted { turn_id: String, input: TurnInput },
    #[serde(rename = "turn.status")]
    TurnStatusChanged { turn_id: String, status: TurnStatus },
    #[serde(rename = "message.completed")]
    MessageCompleted {
        turn_id: String,
        stream_id: String,
        text: String,
    },
    #[serde(rename = "operation.completed")]
    OperationCompleted {
        turn_id: String,
        operation: Operation,
    },
    #[serde(rename = "interaction.opened")]
    InteractionOpened { interaction: Interaction },
    #[serde(rename = "interaction.resolved")]
    InteractionResolved {
        interaction_id: String,
        #[serde(default)]
        turn_id: Option<String>,
        #[serde(default)]
        approval_id: Option<String>,
        resolution: Resolution,
        #[serde(default)]
        via: Option<Via>,
        #[serde(default)]
        decision: Option<Decision>,
    },
    #[serde(rename = "turn.completed")]
    TurnCompleted { turn_id: String },
    #[serde(rename = "turn.cancelled")]
    TurnCancelled {
        turn_id: String,
        reason: String,
        message: String,
    },
    #[serde(rename = "turn.failed")]
    TurnFailed {
        turn_id: String,
        stage: FailStage,
        message: String,
    },
    #[serde(rename = "capabilities.changed")]
    CapabilitiesChanged,
    #[serde(rename = "human_task.opened")]
    HumanTaskOpened { task: HumanTask },
    #[serde(rename = "human_task.decided")]
    HumanTaskDecided {
        task_id: String,
        turn_id: String,
        actor_id: String,
        decision: Decision,
    },
    #[serde(rename = "human_task.cancelled")]
    HumanTaskCancelled {
        task_id: String,
        turn_id: String,
        reason: String,
    },
    #[serde(rename = "human_task.expired")]
    HumanTaskExpired { task_id: String, turn_id: String },
    #[serde(rename = "human_task.reissued")]
    HumanTaskReissued {
        task_id: String,
        turn_id: String,
        nonce: String,
    },
}

impl<'de> Deserialize<'de> for ThreadEvent {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        deserializer.deserialize_map(TagFirst)
    }
}

struct TagFirst;

impl<'de> Visitor<'de> for TagFirst {
    type Value = ThreadEvent;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a thread event: an object with a `type`")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<ThreadEvent, A::Error> {
        let Some(first) = map.next_key::<std::borrow::Cow<'de, str>>()? else {
            return Err(de::Error::missing_field("type"));
        };
        if first == "type" {
            let tag: std::borrow::Cow<'de, str> = map.next_value()?;
            return Mirror::deserialize(Tagged {
                tag: &tag,
                rest: map,
            });
        }
        // `type` later in the object: collect it, then decode the same way.
        let mut fields = serde_json::Map::new();
        fields.insert(first.into_owned(), map.next_value::<Value>()?);
        while let Some((key, value)) = map.next_entry::<String, Value>()? {
            if fields.insert(key.clone(), value).is_some() {
                return Err(de::Error::custom(format_args!("duplicate field `{key}`")));
            }
        }
        let tag = match fields.remove("type") {
            Some(Value::String(tag)) => tag,
            Some(other) => {
                return Err(de::Error::invalid_type(
                    de::Unexpected::Other(&other.to_string()),
                    &"a string",
                ));
            }
            None => return Err(de::Error::missing_field("type")),
        };
        let rest = de::value::MapDeserializer::<_, serde_json::Error>::new(fields.into_iter());
        Mirror::deserialize(Tagged { tag: &tag, rest }).map_err(de::Error::custom)
    }
}

/// An object whose tag was read, presented to the mirror as an externally tagged enum: the
/// tag is the variant, the object's other fields are its fields.
struct Tagged<'t, A> {
    tag: &'t str,
    rest: A,
}

impl<'de, A: MapAccess<'de>> Deserializer<'de> for Tagged<'_, A> {
    type Error = A::Error;

    fn deserialize_any<V: Visitor<'de>>(self, visitor: V) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    fn deserialize_enum<V: Visitor<'de>>(
        self,
        _name: &'static str,
        _variants: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_enum(self)
    }

    forward_to_deserialize_any! {
        bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
        option unit unit_struct newtype_struct seq tuple tuple_struct map struct identifier
        ignored_any
    }
}

impl<'de, A: MapAccess<'de>> EnumAccess<'de> for Tagged<'_, A> {
    type Error = A::Error;
    type Variant = Fields<A>;

    fn variant_seed<V: DeserializeSeed<'de>>(
        self,
        seed: V,
    ) -> Result<(V::Value, Fields<A>), A::Error> {
        if !VARIANTS.contains(&self.tag) {
            return Err(de::Error::unknown_variant(self.tag, VARIANTS));
        }
        let tag: StrDeserializer<'_, A::Error> = self.tag.into_deserializer();
        Ok((seed.deserialize(tag)?, Fields(self.rest)))
    }
}

/// The fields after the tag.
struct Fields<A>(A);

impl<'de, A: MapAccess<'de>> VariantAccess<'de> for Fields<A> {
    type Error = A::Error;

    fn unit_variant(mut self) -> Result<(), A::Error> {
        match self.0.next_key::<String>()? {
            None => Ok(()),
            Some(key) => {
                self.0.next_value::<IgnoredAny>()?;
                Err(de::Error::custom(format_args!(
                    "unknown field `{key}`, there are no fields"
                )))
            }
        }
    }

    fn newtype_variant_seed<T: DeserializeSeed<'de>>(self, _seed: T) -> Result<T::Value, A::Error> {
        Err(de::Error::custom("a thread event has no newtype variants"))
    }

    fn tuple_variant<V: Visitor<'de>>(
        self,
        _len: usize,
        _visitor: V,
    ) -> Result<V::Value, A::Error> {
        Err(de::Error::custom("a thread event has no tuple variants"))
    }

    fn struct_variant<V: Visitor<'de>>(
        self,
        _fields: &'static [&'static str],
        visitor: V,
    ) -> Result<V::Value, A::Error> {
        visitor.visit_map(self.0)
    }
}

#[cfg(test)]
pub(super) mod tests {
    use serde_json::json;

    use super::super::{
        FailStage, Interaction, InteractionKind, Operation, OutcomeKind, Resolution, StampedEvent,
        ThreadEvent, ToolOutcome, TurnInput, TurnStatus,
    };
    use super::VARIANTS;

    pub(in crate::event) fn every_variant() -> Vec<ThreadEvent> {
        let turn_id = || "t1".to_owned();
        vec![
            ThreadEvent::ThreadCreated {
                title: Some("T".into()),
                model: None,
                parent_thread_id: None,
                alias: None,
            },
            ThreadEvent::ThreadCreated {
                title: None,
                model: None,
                parent_thread_id: Some("p".into()),
                alias: Some("a".into()),
            },
            ThreadEvent::ThreadRenamed { title: "U".into() },
            ThreadEvent::ThreadDeleted,
            ThreadEvent::ThreadArchived,
            ThreadEvent::TurnStarted {
                turn_id: turn_id(),
                input: TurnInput {
                    text: "hi".into(),
                    attachments: Vec::new(),
                },
            },
            ThreadEvent::TurnStatusChanged {
                turn_id: turn_id(),
                status: TurnStatus::WaitingForUser,
            },
            ThreadEvent::MessageCompleted {
                turn_id: turn_id(),
                stream_id: "s".into(),
                text: "echo".into(),
            },
            ThreadEvent::OperationCompleted {
                turn_id: turn_id(),
                operation: Operation {
                    id: "op".into(),
                    tool_call_id: "c".into(),
                    agent_name: "demo".into(),
                    tool_name: "shell".into(),
                    input: json!({"n": [1, {"type": "x"}]}),
                    outcome: ToolOutcome {
                        kind: OutcomeKind::ToolFailed,
                        reason: Some("exit 1".into()),
                    },
                    display: json!({"text": "t", "diff": "d"}),
                    app_output: Some(json!({"descriptor": {"status": "available"}})),
                },
            },
            ThreadEvent::InteractionOpened {
                interaction: Interaction {
                    id: "i".into(),
                    turn_id: turn_id(),
                    expires_at_ms: 9,
                    ask: InteractionKind::Approval {
                        approval_id: "a".into(),
                        agent_name: "demo".into(),
                        tool_name: "shell".into(),
                        preview: json!({"command": "ls"}),
                        reason: None,
                    },
                    binding: Some(crate::decision::Binding {
                        nonce: "n".into(),
                        operation_digest: "sha256:0".into(),
                        policy_digest: "sha256:1".into(),
                        requested_permissions: vec![crate::decision::PermissionGrant {
                            capability: "shell".into(),
                            scope: "t".into(),
                            expires_at: None,
                        }],
                    }),
                },
            },
            ThreadEvent::InteractionResolved {
                interaction_id: "i".into(),
                turn_id: Some(turn_id()),
                approval_id: Some("a".into()),
                resolution: Resolution::Approved,
                via: Some(crate::Via::AcceptForSession),
                decision: Some(crate::Decision::of(crate::DecisionKind::AcceptForSession)),
            },
            ThreadEvent::InteractionResolved {
                interaction_id: "i".into(),
                turn_id: Some(turn_id()),
                approval_id: None,
                resolution: Resolution::Submitted {
                    values: json!({"name": "x"}),
                },
                via: None,
                decision: None,
            },
            ThreadEvent::TurnCompleted { turn_id: turn_id() },
            ThreadEvent::TurnCancelled {
                turn_id: turn_id(),
                reason: "user".into(),
                message: "m".into(),
            },
            ThreadEvent::TurnFailed {
                turn_id: turn_id(),
                stage: FailStage::Execute,
                message: "m".into(),
            },
            ThreadEvent::CapabilitiesChanged,
            ThreadEvent::HumanTaskOpened {
                task: crate::event::HumanTask {
                    id: "h".into(),
                    turn_id: turn_id(),
                    node_id: "review".into(),
                    attempt_id: "t:review:1".into(),
                    revision_digest: "sha256:r".into(),
                    operation_digest: "sha256:o".into(),
                    operation: json!({"tool": "deploy"}),
                    nonce: "n".into(),
                    expires_at_ms: 9,
                    quorum: 2,
                    separation_of_duties: true,
                },
            },
            ThreadEvent::HumanTaskDecided {
                task_id: "h".into(),
                turn_id: turn_id(),
                actor_id: "a".into(),
                decision: crate::decision::Decision::decline("no"),
            },
            ThreadEvent::HumanTaskCancelled {
                task_id: "h".into(),
                turn_id: turn_id(),
                reason: "r".into(),
            },
            ThreadEvent::HumanTaskExpired {
                task_id: "h".into(),
                turn_id: turn_id(),
            },
            ThreadEvent::HumanTaskReissued {
                task_id: "h".into(),
                turn_id: turn_id(),
                nonce: "m".into(),
            },
        ]
    }

    #[test]
    fn every_variant_decodes_as_written_with_the_tag_first_or_last() {
        let events = every_variant();
        let mut kinds: Vec<&str> = events.iter().map(ThreadEvent::kind).collect();
        kinds.dedup();
        assert_eq!(kinds, VARIANTS, "the test covers every variant");
        for event in events {
            let bytes = serde_json::to_vec(&StampedEvent {
                at_ms: 1,
                event: event.clone(),
            })
            .unwrap();
            let decoded: StampedEvent = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(decoded.event, event);

            // The tag moved to the end (a map that is not the runtime's order).
            let mut written = serde_json::to_value(&event).unwrap();
            let fields = written.as_object_mut().unwrap();
            let tag = fields.shift_remove("type").unwrap();
            fields.insert("type".into(), tag);
            let text = serde_json::to_string(&written).unwrap();
            let reordered: ThreadEvent = serde_json::from_str(&text).unwrap();
            assert_eq!(reordered, event, "{text}");
        }
    }

    fn error(text: &str) -> String {
        serde_json::from_str::<ThreadEvent>(text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_events_are_refused_with_the_reason() {
        assert_eq!(
            error(r#"{"type":"turn.exploded","turnId":"t"}"#),
            "unknown variant `turn.exploded`, expected one of `thread.created`, `thread.renamed`, \
             `thread.deleted`, `thread.archived`, `turn.started`, `turn.status`, `message.completed`, \
             `operation.completed`, `interaction.opened`, `interaction.resolved`, \
             `turn.completed`, `turn.cancelled`, `turn.failed`, `capabilities.changed`, \
             `human_task.opened`, `human_task.decided`, `human_task.cancelled`, \
             `human_task.expired`, `human_task.reissued` at line 1 \
             column 23"
        );
        assert!(
            error(r#"{"type":"turn.completed","turnId":"t","extra":1}"#)
                .starts_with("unknown field `extra`, expected `turnId`"),
        );
        assert!(
            error(r#"{"type":"thread.deleted","extra":1}"#).starts_with("unknown field `extra`")
        );
        assert!(error(r#"{"type":"turn.completed"}"#).starts_with("missing field `turnId`"));
        assert!(error(r#"{"turnId":"t"}"#).starts_with("missing field `type`"));
        assert!(error("{}").starts_with("missing field `type`"));
        assert!(
            error(r#"{"turnId":"t","type":"turn.completed","turnId":"u"}"#)
                .starts_with("duplicate field `turnId`")
        );
        assert!(
            error(r#"{"turnId":"t","type":7}"#).starts_with("invalid type: 7, expected a string")
        );
        assert!(error(r#"{"type":"turn.completed","turnId":5}"#).starts_with("invalid type"));
        assert!(error("[1]").starts_with("invalid type: sequence"));
    }
}
