//! What the fold reads of an event: the payload field names it looks up ([`Key`], each named
//! once) and the [`EventView`] trait that gives them whichever form the event comes in, a parsed
//! [`RunEvent`] or a line read straight from its text.

use std::borrow::Cow;

use serde_json::{Map, Number, Value};

use crate::event::RunEvent;
use crate::opaque::Json;

macro_rules! payload_names {
    ($($variant:ident => $wire:literal,)*) => {
        /// A payload field the fold reads, named once (a line's fields are found by it without
        /// comparing names).
        #[derive(Debug, Clone, Copy, PartialEq, Eq)]
        pub(crate) enum Key {
            $($variant,)*
        }

        impl Key {
            /// How many names there are.
            pub(crate) const COUNT: usize = [$($wire,)*].len();

            /// The wire name.
            #[inline(always)]
            pub(crate) fn as_str(self) -> &'static str {
                match self {
                    $(Key::$variant => $wire,)*
                }
            }

            /// The name of a wire name.
            pub(crate) fn from_wire(name: &str) -> Option<Key> {
                match name {
                    $($wire => Some(Key::$variant),)*
                    _ => None,
                }
            }
        }
    };
}

payload_names! {
    Goal => "goal",
    Agent => "agent",
    Input => "input",
    Output => "output",
    Summary => "summary",
    Error => "error",
    StepId => "stepId",
    Reason => "reason",
    Message => "message",
    Steps => "steps",
    Title => "title",
    Progress => "progress",
    Retryable => "retryable",
    CallId => "callId",
    Name => "name",
    Args => "args",
    Ok => "ok",
    Result => "result",
    Ms => "ms",
    Tokens => "tokens",
    Cost => "cost",
    ApprovalId => "approvalId",
    Risk => "risk",
    Preview => "preview",
    Decision => "decision",
    By => "by",
    Comment => "comment",
    Edited => "edited",
    FromEventId => "fromEventId",
    Attempt => "attempt",
}

/// What the fold reads of an event, whichever form it comes in: a parsed [`RunEvent`] or a line
/// read straight from its text.
pub(crate) trait EventView {
    fn id(&self) -> &str;
    fn run_id(&self) -> &str;
    fn seq(&self) -> u64;
    fn at(&self) -> u64;
    /// A payload string.
    fn str_field(&self, name: Key) -> Option<Cow<'_, str>>;
    /// A payload boolean.
    fn bool_field(&self, name: Key) -> Option<bool>;
    /// A payload number.
    fn number_field(&self, name: Key) -> Option<Number>;
    /// A payload value kept opaque.
    fn json_field(&self, name: Key) -> Option<Json>;
    /// A payload value as a tree (for the few fields the fold looks inside).
    fn with_value<R>(&self, name: Key, f: impl FnOnce(Option<&Value>) -> R) -> R;
    /// The whole event as a value.
    fn raw(&self) -> Value;

    #[inline(always)]
    fn f64_field(&self, name: Key) -> Option<f64> {
        self.number_field(name).and_then(|n| n.as_f64())
    }

    #[inline(always)]
    fn u64_field(&self, name: Key) -> Option<u64> {
        self.number_field(name).and_then(|n| n.as_u64())
    }

    #[inline(always)]
    fn string_field(&self, name: Key) -> Option<String> {
        self.str_field(name).map(Cow::into_owned)
    }
}

/// A payload member; payloads are small, so a scan beats hashing the name. Inlined into each
/// lookup, where the name is a constant: each key is then compared with it by a length check and
/// a few word compares, not a call to `memcmp`.
#[inline(always)]
fn member(map: &Map<String, Value>, name: Key) -> Option<&Value> {
    let name = name.as_str();
    if map.len() <= 12 {
        map.iter().find(|(k, _)| k.as_str() == name).map(|(_, v)| v)
    } else {
        map.get(name)
    }
}

impl EventView for RunEvent {
    fn id(&self) -> &str {
        &self.id
    }

    fn run_id(&self) -> &str {
        &self.run_id
    }

    fn seq(&self) -> u64 {
        self.seq
    }

    fn at(&self) -> u64 {
        self.at
    }

    #[inline(always)]
    fn str_field(&self, name: Key) -> Option<Cow<'_, str>> {
        member(&self.payload, name)
            .and_then(Value::as_str)
            .map(Cow::Borrowed)
    }

    #[inline(always)]
    fn bool_field(&self, name: Key) -> Option<bool> {
        member(&self.payload, name).and_then(Value::as_bool)
    }

    #[inline(always)]
    fn number_field(&self, name: Key) -> Option<Number> {
        match member(&self.payload, name) {
            Some(Value::Number(n)) => Some(n.clone()),
            _ => None,
        }
    }

    #[inline(always)]
    fn json_field(&self, name: Key) -> Option<Json> {
        member(&self.payload, name).map(Json::from_value)
    }

    #[inline(always)]
    fn with_value<R>(&self, name: Key, f: impl FnOnce(Option<&Value>) -> R) -> R {
        f(member(&self.payload, name))
    }

    fn raw(&self) -> Value {
        self.to_value()
    }
}
