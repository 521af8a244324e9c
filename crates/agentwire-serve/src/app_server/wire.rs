//! The App Server's objects as the face writes them: `Thread`, `Turn`, `Item`, the approval
//! request, and the limits every line written keeps.

use std::time::{Duration, UNIX_EPOCH};

use agentwire_runtime::{ThreadState, ThreadSummary};
use serde_json::{Value, json};
use sha2::{Digest as _, Sha256};

/// The largest line the SDK reads (its reader's limit, the newline excluded).
pub const MAX_LINE_BYTES: usize = 65_536;

/// The most text one `item/delta` carries: with the envelope and JSON escaping (at most six
/// bytes a character for control characters), a delta line stays under [`MAX_LINE_BYTES`].
pub const MAX_DELTA_TEXT_BYTES: usize = 8 * 1024;

/// The most text an `item/completed` carries in its content; a longer message's text reaches
/// the host as deltas, and its completion says how long it was.
pub const MAX_COMPLETED_TEXT_BYTES: usize = 8 * 1024;

/// The most a free-text field of a notification or request (an error message, a reason) takes
/// as JSON text; past it the text is cut ([`cut_text`]), so a line stays under
/// [`MAX_LINE_BYTES`] whatever the agent or a host wrote.
pub const MAX_MESSAGE_JSON_BYTES: usize = 8 * 1024;

/// The most a name (a tool's, an agent's) takes as JSON text; past it the name is cut.
pub const MAX_NAME_JSON_BYTES: usize = 1024;

/// `text`, cut at a character so that its JSON string (quotes and escapes included) takes at
/// most `max_json_bytes`, ending with `…` when cut.
pub fn cut_text(text: &str, max_json_bytes: usize) -> String {
    fn width(c: char) -> usize {
        match c {
            '"' | '\\' | '\n' | '\r' | '\t' | '\u{8}' | '\u{c}' => 2,
            c if (c as u32) < 0x20 => 6,
            c => c.len_utf8(),
        }
    }
    let mut used = 2;
    if text.chars().all(|c| {
        used += width(c);
        used <= max_json_bytes
    }) {
        return text.to_owned();
    }
    let budget = max_json_bytes.saturating_sub(2 + '…'.len_utf8());
    let mut cut = String::new();
    let mut used = 0;
    for c in text.chars() {
        used += width(c);
        if used > budget {
            break;
        }
        cut.push(c);
    }
    cut.push('…');
    cut
}

/// An RFC 3339 timestamp (UTC, milliseconds) of a time in milliseconds since the epoch.
pub fn timestamp(ms: u64) -> String {
    humantime::format_rfc3339_millis(UNIX_EPOCH + Duration::from_millis(ms)).to_string()
}

pub use agentwire_runtime::decision::digest;

/// A thread as the App Server shows it: `archived` once archived, `active` while a turn runs;
/// its revision is the sequence number of its last event (the App Server numbers a thread's
/// events from 1).
pub fn thread(summary: &ThreadSummary, active: bool, revision: u64) -> Value {
    let status = if summary.archived {
        "archived"
    } else if active {
        "active"
    } else {
        "idle"
    };
    let mut thread = json!({
        "id": summary.id,
        "status": status,
        "title": summary.title,
        "createdAt": timestamp(summary.created_at_ms),
        "updatedAt": timestamp(summary.updated_at_ms),
        "revision": revision,
    });
    if let Some(parent) = &summary.parent_thread_id {
        thread["parentThreadId"] = json!(parent);
    }
    thread
}

/// A thread from its state.
pub fn thread_of_state(thread_id: &str, state: &ThreadState) -> Value {
    thread(
        &state.summary(thread_id),
        state.active_turn.is_some(),
        state.next_position,
    )
}

/// The status of a turn.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TurnStatus {
    Running,
    WaitingApproval,
    Completed,
    Failed,
    Interrupted,
}

impl TurnStatus {
    fn as_str(self) -> &'static str {
        match self {
            TurnStatus::Running => "running",
            TurnStatus::WaitingApproval => "waiting_approval",
            TurnStatus::Completed => "completed",
            TurnStatus::Failed => "failed",
            TurnStatus::Interrupted => "interrupted",
        }
    }

    /// Whether the turn has ended.
    pub fn is_terminal(self) -> bool {
        matches!(
            self,
            TurnStatus::Completed | TurnStatus::Failed | TurnStatus::Interrupted
        )
    }
}

/// A turn: every field sent, `completedAt` null until it ended.
pub fn turn(
    thread_id: &str,
    turn_id: &str,
    status: TurnStatus,
    created_at_ms: u64,
    completed_at_ms: Option<u64>,
    revision: u64,
) -> Value {
    json!({
        "id": turn_id,
        "threadId": thread_id,
        "status": status.as_str(),
        "createdAt": timestamp(created_at_ms),
        "completedAt": completed_at_ms.map(timestamp),
        "revision": revision,
    })
}

/// The status of an item.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ItemStatus {
    Started,
    Completed,
    Failed,
    Cancelled,
}

impl ItemStatus {
    fn as_str(self) -> &'static str {
        match self {
            ItemStatus::Started => "started",
            ItemStatus::Completed => "completed",
            ItemStatus::Failed => "failed",
            ItemStatus::Cancelled => "cancelled",
        }
    }
}

/// An item of a turn.
#[derive(Debug)]
pub struct ItemView<'a> {
    pub id: &'a str,
    pub thread_id: &'a str,
    pub turn_id: &'a str,
    pub kind: &'static str,
    pub status: ItemStatus,
    pub created_at_ms: u64,
    pub completed_at_ms: Option<u64>,
    pub content: Option<Value>,
}

/// An item as the App Server writes it.
pub fn item(view: ItemView<'_>) -> Value {
    let mut item = json!({
        "id": view.id,
        "threadId": view.thread_id,
        "turnId": view.turn_id,
        "kind": view.kind,
        "status": view.status.as_str(),
        "createdAt": timestamp(view.created_at_ms),
    });
    if let Some(content) = view.content {
        item["content"] = content;
    }
    if let Some(at) = view.completed_at_ms {
        item["completedAt"] = json!(timestamp(at));
    }
    item
}

/// Splits `text` into pieces of at most `max` bytes, on character boundaries.
pub fn chunks(text: &str, max: usize) -> Vec<&str> {
    let mut out = Vec::new();
    let mut rest = text;
    while !rest.is_empty() {
        let mut end = rest.len().min(max);
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (head, tail) = rest.split_at(end);
        out.push(head);
        rest = tail;
    }
    out
}

/// The runtime's id of a thread or turn an App Server host names `name`: the name itself when it
/// is a UUID, which every face can show; otherwise a UUID (version 8) derived from `kind`,
/// `scope` (the thread, for a turn) and the name, so the same name always finds the same
/// thread or turn, and the name is kept as the thread's alias (a turn's, for the connection).
pub fn core_id(kind: &str, scope: &str, name: &str) -> String {
    if let Ok(uuid) = uuid::Uuid::parse_str(name)
        && uuid.hyphenated().to_string() == name
        && (1..=8).contains(&uuid.get_version_num())
        && uuid.get_variant() == uuid::Variant::RFC4122
    {
        return name.to_owned();
    }
    let hash = Sha256::new()
        .chain_update(b"agentwire app-server id\0")
        .chain_update(kind.as_bytes())
        .chain_update(b"\0")
        .chain_update(scope.as_bytes())
        .chain_update(b"\0")
        .chain_update(name.as_bytes())
        .finalize();
    let mut bytes = [0u8; 16];
    bytes.copy_from_slice(&hash[..16]);
    uuid::Builder::from_custom_bytes(bytes)
        .into_uuid()
        .hyphenated()
        .to_string()
}

/// Whether `id` is an App Server `Identifier`: 1 to 160 characters, a letter or digit first,
/// then letters, digits and `._:/-`.
pub fn is_identifier(id: &str) -> bool {
    let bytes = id.as_bytes();
    !bytes.is_empty()
        && bytes.len() <= 160
        && bytes[0].is_ascii_alphanumeric()
        && bytes
            .iter()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b':' | b'/' | b'-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn texts_are_cut_to_their_json_size() {
        assert_eq!(cut_text("short", 100), "short");
        for text in [
            "é".repeat(1000),
            "\u{1}".repeat(1000),
            "\"".repeat(1000),
            "a".repeat(1000),
        ] {
            let cut = cut_text(&text, 100);
            assert!(cut.ends_with('…'), "{cut:?}");
            let json = serde_json::to_string(&cut).unwrap();
            assert!(
                json.len() <= 100 && json.len() > 90,
                "{} bytes: {json}",
                json.len()
            );
        }
        let exact = "a".repeat(98);
        assert_eq!(cut_text(&exact, 100), exact);
    }

    #[test]
    fn chunks_split_on_character_boundaries_within_the_limit() {
        let text = "aé€😀".repeat(1000);
        let pieces = chunks(&text, 7);
        assert!(pieces.iter().all(|p| p.len() <= 7 && !p.is_empty()));
        assert_eq!(pieces.concat(), text);
        assert!(chunks("", 7).is_empty());
    }

    #[test]
    fn identifiers_follow_the_app_server_pattern() {
        for good in ["a", "thread-1", "x:y/z.w_v", &"a".repeat(160)] {
            assert!(is_identifier(good), "{good}");
        }
        for bad in ["", "-a", "a b", "a\n", &"a".repeat(161), "é"] {
            assert!(!is_identifier(bad), "{bad}");
        }
    }

    #[test]
    fn a_uuid_names_itself_and_any_other_name_a_stable_uuid_of_its_scope() {
        let uuid = "0b7c2a1e-3f4d-4c5b-9a6e-7d8f9e0a1b2c";
        assert_eq!(core_id("thread", "", uuid), uuid);
        let derived = core_id("thread", "", "thread-1");
        assert_eq!(derived, core_id("thread", "", "thread-1"));
        assert_ne!(derived, core_id("turn", "", "thread-1"));
        assert_ne!(core_id("turn", "a", "t"), core_id("turn", "b", "t"));
        let parsed = uuid::Uuid::parse_str(&derived).unwrap();
        assert_eq!(parsed.get_version_num(), 8);
        // Not hyphenated lower case: not taken as is.
        assert_ne!(
            core_id("thread", "", &uuid.to_uppercase()),
            uuid.to_uppercase()
        );
    }

    #[test]
    fn timestamps_are_rfc3339_utc_with_milliseconds() {
        assert_eq!(timestamp(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
    }
}
