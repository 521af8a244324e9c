//! Fuzzes the `rte1:` event cursor parser of agentwire-roll: any text is a cursor or a typed
//! error, and a parsed cursor keeps its text, reads back the same from its canonical form, and
//! compares equal to itself.
#![no_main]

use std::cmp::Ordering;

use agentwire_roll::constants::MAX_EVENT_CURSOR_CHARS;
use agentwire_roll::cursor::{
    CursorKey, EventCursor, compare_event_cursors, event_cursor_distance,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let cursor = match EventCursor::parse(&text) {
        Ok(cursor) => cursor,
        Err(err) => {
            assert!(err.code().starts_with("roll.cursor."));
            return;
        }
    };
    assert!(text.len() <= MAX_EVENT_CURSOR_CHARS);
    assert_eq!(cursor.as_str(), text);
    // The canonical form (lower-case hex) names the same position of the same log.
    let canonical = EventCursor::new(cursor.log_id(), cursor.sequence(), cursor.event_id());
    assert_eq!(canonical.as_str(), text.to_ascii_lowercase());
    let again = EventCursor::parse(canonical.as_str()).expect("a minted cursor parses");
    assert_eq!(again, canonical);
    assert_eq!(
        compare_event_cursors(Some(&cursor), Some(&canonical)),
        Ok(Ordering::Equal)
    );
    assert_eq!(event_cursor_distance(Some(&cursor), Some(&cursor)), Ok(0));
    assert_eq!(
        compare_event_cursors(None, Some(&cursor)),
        Ok(Ordering::Less)
    );
    // A key accepts what it minted, and judges any other cursor without panicking.
    let key = CursorKey::new(b"fuzz");
    let minted = key.mint(cursor.log_id(), cursor.sequence());
    assert_eq!(key.verify(&minted), Ok(()));
    let _ = key.verify(&cursor);
});
