//! Durable-event cursors of the `rte1:` family: parsing, minting, exact comparison and
//! distance, and detection of cursors from another log and of forged ones.
//!
//! Inside, a cursor is `rte1:<eventLogId>:<threadSequence>:<eventId>`:
//! - `eventLogId` names one thread's event log, so two cursors from different threads (or from a
//!   log that was re-created) never compare: [`CursorError::DifferentLog`];
//! - `threadSequence` is the gap-free position in that log, so compare and distance are integer
//!   operations on the parsed cursor;
//! - `eventId` is the id of the event at that position, so a cursor whose sequence was edited no
//!   longer matches its event: two cursors with the same sequence but different event ids are a
//!   [`CursorError::Conflict`], and a runtime that mints event ids with a [`CursorKey`] recomputes
//!   the id from the log id and sequence and rejects any other ([`CursorError::Forged`]).
//!
//! Without the key a peer detects other-log cursors and conflicts, never a well-formed cursor
//! naming a position it has not seen; only the minting runtime (which holds the key) can.

use std::cmp::Ordering;
use std::fmt::{self, Write as _};

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use sha2::{Digest, Sha256};

use crate::constants::MAX_EVENT_CURSOR_CHARS;

const PREFIX: &str = "rte1:";

/// Why a cursor was refused.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CursorError {
    /// Not of the form `rte1:<uuid>:<decimal>:<uuid>` within 128 characters.
    #[error("malformed event cursor: {0}")]
    Malformed(String),
    /// The sequence does not fit in 64 bits.
    #[error("event cursor sequence out of range")]
    SequenceOutOfRange,
    /// The two cursors belong to different event logs (different threads).
    #[error("event cursors belong to different event logs")]
    DifferentLog,
    /// Same position, different event: at least one of them is not from this log.
    #[error("event cursors name the same position with different events")]
    Conflict,
    /// The cursor names another log than the one it was presented for.
    #[error("event cursor belongs to another thread's event log")]
    OtherLog,
    /// The event id does not match what the runtime's key gives for this log and position.
    #[error("event cursor was not minted by this runtime")]
    Forged,
}

impl CursorError {
    /// Stable error code.
    pub fn code(&self) -> &'static str {
        match self {
            CursorError::Malformed(_) => "roll.cursor.malformed",
            CursorError::SequenceOutOfRange => "roll.cursor.sequence-out-of-range",
            CursorError::DifferentLog => "roll.cursor.different-log",
            CursorError::Conflict => "roll.cursor.conflict",
            CursorError::OtherLog => "roll.cursor.other-log",
            CursorError::Forged => "roll.cursor.forged",
        }
    }
}

/// A 128-bit id written as 8-4-4-4-12 hex (either case on input, lower case on output).
pub type Uuid128 = [u8; 16];

fn parse_hex_uuid(text: &str) -> Option<Uuid128> {
    let bytes = text.as_bytes();
    if bytes.len() != 36 {
        return None;
    }
    let mut out = [0u8; 16];
    let mut nibble = 0usize;
    for (index, byte) in bytes.iter().enumerate() {
        if matches!(index, 8 | 13 | 18 | 23) {
            if *byte != b'-' {
                return None;
            }
            continue;
        }
        let value = (*byte as char).to_digit(16)? as u8;
        out[nibble / 2] |= if nibble.is_multiple_of(2) {
            value << 4
        } else {
            value
        };
        nibble += 1;
    }
    Some(out)
}

fn format_uuid(bytes: &Uuid128) -> String {
    let mut out = String::with_capacity(36);
    push_uuid(&mut out, bytes);
    out
}

/// Appends the 8-4-4-4-12 lowercase hex form of `bytes`.
fn push_uuid(out: &mut String, bytes: &Uuid128) {
    let _ = write!(out, "{}", UuidText(*bytes));
}

/// The 8-4-4-4-12 lowercase hex form of an id, as `Display`.
struct UuidText(Uuid128);

impl fmt::Display for UuidText {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Only ASCII hex digits and dashes are written.
        f.write_str(std::str::from_utf8(&hyphenated(&self.0)).map_err(|_| fmt::Error)?)
    }
}

/// The 8-4-4-4-12 lowercase hex form of `id`, as ASCII bytes.
fn hyphenated(id: &Uuid128) -> [u8; 36] {
    const HEX: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; 36];
    let mut at = 0;
    for (index, byte) in id.iter().enumerate() {
        if matches!(index, 4 | 6 | 8 | 10) {
            out[at] = b'-';
            at += 1;
        }
        out[at] = HEX[usize::from(byte >> 4)];
        out[at + 1] = HEX[usize::from(byte & 0x0f)];
        at += 2;
    }
    out
}

/// An opaque durable-event cursor. Equality is on the wire text; order only through
/// [`compare_event_cursors`].
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct EventCursor {
    text: String,
    log_id: Uuid128,
    sequence: u64,
    event_id: Uuid128,
}

impl EventCursor {
    /// Parses and checks a wire cursor.
    pub fn parse(text: &str) -> Result<EventCursor, CursorError> {
        let malformed = || CursorError::Malformed(text.chars().take(40).collect());
        if text.len() > MAX_EVENT_CURSOR_CHARS {
            return Err(malformed());
        }
        let rest = text.strip_prefix(PREFIX).ok_or_else(malformed)?;
        let mut parts = rest.split(':');
        let (Some(log), Some(sequence), Some(event), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(malformed());
        };
        let log_id = parse_hex_uuid(log).ok_or_else(malformed)?;
        let event_id = parse_hex_uuid(event).ok_or_else(malformed)?;
        if sequence.is_empty()
            || !sequence.bytes().all(|b| b.is_ascii_digit())
            || (sequence.len() > 1 && sequence.starts_with('0'))
        {
            return Err(malformed());
        }
        let sequence: u64 = sequence
            .parse()
            .map_err(|_| CursorError::SequenceOutOfRange)?;
        Ok(EventCursor {
            text: text.to_owned(),
            log_id,
            sequence,
            event_id,
        })
    }

    /// Builds the cursor of the event `event_id` at `sequence` in log `log_id`.
    pub fn new(log_id: Uuid128, sequence: u64, event_id: Uuid128) -> EventCursor {
        let mut text = String::with_capacity(PREFIX.len() + 36 + 1 + 20 + 1 + 36);
        text.push_str(PREFIX);
        push_uuid(&mut text, &log_id);
        text.push(':');
        let _ = write!(text, "{sequence}");
        text.push(':');
        push_uuid(&mut text, &event_id);
        EventCursor {
            text,
            log_id,
            sequence,
            event_id,
        }
    }

    /// The wire text, owned.
    pub fn into_text(self) -> String {
        self.text
    }

    /// The wire text.
    pub fn as_str(&self) -> &str {
        &self.text
    }

    /// The event log (one per thread). For the runtime and its store; clients treat cursors as
    /// opaque.
    pub fn log_id(&self) -> Uuid128 {
        self.log_id
    }

    /// The position in the log. For the runtime and its store.
    pub fn sequence(&self) -> u64 {
        self.sequence
    }

    /// The event at that position; equals the envelope's `eventId`.
    pub fn event_id(&self) -> Uuid128 {
        self.event_id
    }

    /// The event id in wire form (lower-case hex).
    pub fn event_id_text(&self) -> String {
        format_uuid(&self.event_id)
    }

    /// The event id in wire form, displayed without building a string (for writers that
    /// format into their own buffer).
    pub fn event_id_display(&self) -> impl fmt::Display + use<> {
        UuidText(self.event_id)
    }

    /// Fails unless the cursor belongs to `log_id` (the log of the thread it was sent for).
    pub fn ensure_log(&self, log_id: &Uuid128) -> Result<(), CursorError> {
        if &self.log_id == log_id {
            Ok(())
        } else {
            Err(CursorError::OtherLog)
        }
    }

    /// Whether the cursor's event id equals `event_id` (the envelope's `eventId`), ignoring case.
    pub fn names_event(&self, event_id: &str) -> bool {
        parse_hex_uuid(event_id).is_some_and(|id| id == self.event_id)
    }
}

impl fmt::Display for EventCursor {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

impl Serialize for EventCursor {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.text)
    }
}

impl<'de> Deserialize<'de> for EventCursor {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        let text = String::deserialize(deserializer)?;
        EventCursor::parse(&text).map_err(serde::de::Error::custom)
    }
}

/// Orders two checkpoints of one log; `None` is the start of the log and sorts first.
pub fn compare_event_cursors(
    left: Option<&EventCursor>,
    right: Option<&EventCursor>,
) -> Result<Ordering, CursorError> {
    match (left, right) {
        (None, None) => Ok(Ordering::Equal),
        (None, Some(_)) => Ok(Ordering::Less),
        (Some(_), None) => Ok(Ordering::Greater),
        (Some(a), Some(b)) => {
            if a.log_id != b.log_id {
                return Err(CursorError::DifferentLog);
            }
            match a.sequence.cmp(&b.sequence) {
                Ordering::Equal if a.event_id != b.event_id => Err(CursorError::Conflict),
                order => Ok(order),
            }
        }
    }
}

/// How many events lie after `from` up to and including `to` (negative when `to` is earlier);
/// `None` is the checkpoint before sequence 0.
pub fn event_cursor_distance(
    from: Option<&EventCursor>,
    to: Option<&EventCursor>,
) -> Result<i128, CursorError> {
    compare_event_cursors(from, to)?;
    let position = |c: Option<&EventCursor>| c.map_or(-1, |c| i128::from(c.sequence));
    Ok(position(to) - position(from))
}

/// A runtime secret that derives each event id from its log and position, so the runtime can
/// tell its own cursors from forged ones without a lookup.
#[derive(Clone)]
pub struct CursorKey {
    /// SHA-256's state after the HMAC inner pad's block, and after the outer pad's: each MAC
    /// continues from them, one block each for a cursor's 24-byte message.
    inner: [u32; 8],
    outer: [u32; 8],
}

/// SHA-256's initial state (FIPS 180-4, 5.3.3).
const SHA256_INITIAL: [u32; 8] = [
    0x6a09_e667,
    0xbb67_ae85,
    0x3c6e_f372,
    0xa54f_f53a,
    0x510e_527f,
    0x9b05_688c,
    0x1f83_d9ab,
    0x5be0_cd19,
];

/// The SHA-256 digest of one 64-byte block (already compressed into `state`) followed by
/// `message`: the rest of the message in whole blocks, then the padding and the bit length,
/// with no buffer or allocation.
fn sha256_after_block(mut state: [u32; 8], message: &[u8]) -> [u8; 32] {
    let mut blocks = message.chunks_exact(64);
    for block in blocks.by_ref() {
        let mut whole = [0u8; 64];
        whole.copy_from_slice(block);
        sha2::block_api::compress256(&mut state, &[whole]);
    }
    let rest = blocks.remainder();
    let bits = ((64 + message.len()) as u64).wrapping_mul(8);
    let mut tail = [[0u8; 64]; 2];
    let flat = tail.as_flattened_mut();
    flat[..rest.len()].copy_from_slice(rest);
    flat[rest.len()] = 0x80;
    // The length ends the first block when the rest and its 0x80 leave eight bytes for it.
    let used = if rest.len() < 56 { 1 } else { 2 };
    flat[used * 64 - 8..used * 64].copy_from_slice(&bits.to_be_bytes());
    sha2::block_api::compress256(&mut state, &tail[..used]);
    let mut digest = [0u8; 32];
    for (out, word) in digest.chunks_exact_mut(4).zip(state) {
        out.copy_from_slice(&word.to_be_bytes());
    }
    digest
}

impl fmt::Debug for CursorKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("CursorKey(..)")
    }
}

impl CursorKey {
    /// A key from secret bytes (hashed to 32 bytes when longer).
    pub fn new(secret: &[u8]) -> CursorKey {
        let mut key = [0u8; 32];
        if secret.len() > 32 {
            key.copy_from_slice(&Sha256::digest(secret));
        } else {
            key[..secret.len()].copy_from_slice(secret);
        }
        let mut inner_pad = [0x36u8; 64];
        let mut outer_pad = [0x5cu8; 64];
        for (index, byte) in key.iter().enumerate() {
            inner_pad[index] ^= byte;
            outer_pad[index] ^= byte;
        }
        let mut inner = SHA256_INITIAL;
        sha2::block_api::compress256(&mut inner, &[inner_pad]);
        let mut outer = SHA256_INITIAL;
        sha2::block_api::compress256(&mut outer, &[outer_pad]);
        CursorKey { inner, outer }
    }

    /// HMAC-SHA256 of `message` under the key.
    fn mac(&self, message: &[u8]) -> [u8; 32] {
        let inner = sha256_after_block(self.inner, message);
        sha256_after_block(self.outer, &inner)
    }

    /// The event id of position `sequence` in log `log_id`: HMAC-SHA256 truncated to a
    /// version-8 UUID (122 bits of MAC).
    pub fn event_id(&self, log_id: &Uuid128, sequence: u64) -> Uuid128 {
        let mut message = [0u8; 24];
        message[..16].copy_from_slice(log_id);
        message[16..].copy_from_slice(&sequence.to_be_bytes());
        let mac = self.mac(&message);
        let mut id = [0u8; 16];
        id.copy_from_slice(&mac[..16]);
        id[6] = (id[6] & 0x0f) | 0x80;
        id[8] = (id[8] & 0x3f) | 0x80;
        id
    }

    /// The cursor of position `sequence` in log `log_id`.
    pub fn mint(&self, log_id: Uuid128, sequence: u64) -> EventCursor {
        EventCursor::new(log_id, sequence, self.event_id(&log_id, sequence))
    }

    /// Fails with [`CursorError::Forged`] unless this key minted the cursor.
    pub fn verify(&self, cursor: &EventCursor) -> Result<(), CursorError> {
        let expected = self.event_id(&cursor.log_id, cursor.sequence);
        let mut difference = 0u8;
        for (a, b) in expected.iter().zip(cursor.event_id.iter()) {
            difference |= a ^ b;
        }
        if difference == 0 {
            Ok(())
        } else {
            Err(CursorError::Forged)
        }
    }
}

/// The wire text of the cursors of one log and of their event ids, written into byte buffers:
/// the text [`CursorKey::mint`] gives, without building an [`EventCursor`] per event (a replay
/// writes one per event it sends).
#[derive(Debug, Clone)]
pub struct CursorWriter {
    key: CursorKey,
    log_id: Uuid128,
    /// `rte1:<eventLogId>:`.
    head: Vec<u8>,
}

impl CursorWriter {
    /// The cursors `key` mints for log `log_id`.
    pub fn new(key: &CursorKey, log_id: Uuid128) -> CursorWriter {
        let mut head = Vec::with_capacity(PREFIX.len() + 37);
        head.extend_from_slice(PREFIX.as_bytes());
        head.extend_from_slice(&hyphenated(&log_id));
        head.push(b':');
        CursorWriter {
            key: key.clone(),
            log_id,
            head,
        }
    }

    /// The event id of position `sequence` in wire form, as
    /// [`EventCursor::event_id_text`] of its cursor.
    pub fn event_id(&self, sequence: u64) -> [u8; 36] {
        hyphenated(&self.key.event_id(&self.log_id, sequence))
    }

    /// Appends the text of the cursor of position `sequence`, whose event id in wire form is
    /// `event_id` (from [`CursorWriter::event_id`]).
    pub fn push_cursor(&self, out: &mut Vec<u8>, sequence: u64, event_id: &[u8; 36]) {
        out.extend_from_slice(&self.head);
        out.extend_from_slice(itoa::Buffer::new().format(sequence).as_bytes());
        out.push(b':');
        out.extend_from_slice(event_id);
    }
}

#[cfg(test)]
mod tests {
    use super::{CursorKey, CursorWriter};

    #[test]
    fn the_writer_writes_the_minted_text() {
        let key = CursorKey::new(b"secret");
        let log_id = [0x5a; 16];
        let writer = CursorWriter::new(&key, log_id);
        for sequence in [0, 7, 10, 999, u64::MAX] {
            let cursor = key.mint(log_id, sequence);
            let event_id = writer.event_id(sequence);
            assert_eq!(event_id.as_slice(), cursor.event_id_text().as_bytes());
            let mut out = b"x".to_vec();
            writer.push_cursor(&mut out, sequence, &event_id);
            assert_eq!(&out[1..], cursor.as_str().as_bytes(), "{sequence}");
        }
    }

    #[test]
    fn the_block_level_mac_is_the_digest_api_s_hmac() {
        use sha2::{Digest, Sha256};
        // Keys shorter and longer than a block's worth, messages across both padding cases
        // (the length in the last block, or in one more) and across whole blocks.
        for secret in [b"k".as_slice(), &[7u8; 32], &[9u8; 100]] {
            let key = CursorKey::new(secret);
            let mut padded = [0u8; 32];
            if secret.len() > 32 {
                padded.copy_from_slice(&Sha256::digest(secret));
            } else {
                padded[..secret.len()].copy_from_slice(secret);
            }
            let pad = |byte: u8| {
                let mut block = [byte; 64];
                for (b, k) in block.iter_mut().zip(padded) {
                    *b ^= k;
                }
                block
            };
            for length in 0..200usize {
                let message: Vec<u8> = (0..length).map(|i| (i * 31 + length) as u8).collect();
                let inner = Sha256::new()
                    .chain_update(pad(0x36))
                    .chain_update(&message)
                    .finalize();
                let expected: [u8; 32] = Sha256::new()
                    .chain_update(pad(0x5c))
                    .chain_update(inner)
                    .finalize()
                    .into();
                assert_eq!(key.mac(&message), expected, "{length}");
            }
        }
    }

    #[test]
    fn the_mac_is_hmac_sha256() {
        // RFC 4231, test case 2.
        let mac = CursorKey::new(b"Jefe").mac(b"what do ya want for nothing?");
        let hex: String = mac.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(
            hex,
            "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843"
        );
    }
}
