//! Event cursors: parsing, ordering, distance, other-log and forged cursors.

#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::cmp::Ordering;

use agentwire_roll::cursor::{CursorError, CursorKey, EventCursor};
use agentwire_roll::{compare_event_cursors, event_cursor_distance};
use proptest::prelude::*;

const FIXTURE: &str =
    "rte1:00000000-0000-4000-8000-000000000008:0:00000000-0000-4000-8000-000000000007";

#[test]
fn parses_the_upstream_cursor() {
    let cursor = EventCursor::parse(FIXTURE).unwrap();
    assert_eq!(cursor.sequence(), 0);
    assert_eq!(cursor.as_str(), FIXTURE);
    assert!(cursor.names_event("00000000-0000-4000-8000-000000000007"));
    assert!(!cursor.names_event("00000000-0000-4000-8000-000000000006"));
}

#[test]
fn rejects_malformed_cursors() {
    let bad = [
        "00000000-0000-4000-8000-000000000007",
        "rte2:00000000-0000-4000-8000-000000000008:0:00000000-0000-4000-8000-000000000007",
        "rte1:00000000-0000-4000-8000-000000000008:01:00000000-0000-4000-8000-000000000007",
        "rte1:00000000-0000-4000-8000-000000000008:-1:00000000-0000-4000-8000-000000000007",
        "rte1:00000000-0000-4000-8000-000000000008::00000000-0000-4000-8000-000000000007",
        "rte1:00000000-0000-4000-8000-00000000000g:0:00000000-0000-4000-8000-000000000007",
        "rte1:00000000-0000-4000-8000-000000000008:0:00000000-0000-4000-8000-000000000007:x",
    ];
    for text in bad {
        assert!(
            matches!(EventCursor::parse(text), Err(CursorError::Malformed(_))),
            "{text}"
        );
    }
    let huge = format!(
        "rte1:00000000-0000-4000-8000-000000000008:{}:00000000-0000-4000-8000-000000000007",
        "9".repeat(25)
    );
    assert_eq!(
        EventCursor::parse(&huge),
        Err(CursorError::SequenceOutOfRange)
    );
    let too_long = format!(
        "rte1:00000000-0000-4000-8000-000000000008:{}:00000000-0000-4000-8000-000000000007",
        "9".repeat(60)
    );
    assert!(matches!(
        EventCursor::parse(&too_long),
        Err(CursorError::Malformed(_))
    ));
}

#[test]
fn null_is_the_start_of_the_log() {
    let key = CursorKey::new(b"secret");
    let c = key.mint([1; 16], 4);
    assert_eq!(compare_event_cursors(None, Some(&c)), Ok(Ordering::Less));
    assert_eq!(compare_event_cursors(Some(&c), None), Ok(Ordering::Greater));
    assert_eq!(compare_event_cursors(None, None), Ok(Ordering::Equal));
    assert_eq!(event_cursor_distance(None, Some(&c)), Ok(5));
    assert_eq!(event_cursor_distance(Some(&c), None), Ok(-5));
    assert_eq!(event_cursor_distance(None, None), Ok(0));
}

#[test]
fn cursors_of_another_log_and_conflicts_are_errors() {
    let key = CursorKey::new(b"secret");
    let a = key.mint([1; 16], 3);
    let other = key.mint([2; 16], 3);
    assert_eq!(
        compare_event_cursors(Some(&a), Some(&other)),
        Err(CursorError::DifferentLog)
    );
    assert_eq!(
        event_cursor_distance(Some(&a), Some(&other)),
        Err(CursorError::DifferentLog)
    );
    assert_eq!(other.ensure_log(&[1; 16]), Err(CursorError::OtherLog));
    assert_eq!(a.ensure_log(&[1; 16]), Ok(()));
    let conflict = EventCursor::new([1; 16], 3, [9; 16]);
    assert_eq!(
        compare_event_cursors(Some(&a), Some(&conflict)),
        Err(CursorError::Conflict)
    );
}

#[test]
fn the_key_detects_forged_cursors() {
    let key = CursorKey::new(b"secret");
    let minted = key.mint([7; 16], 42);
    assert_eq!(key.verify(&minted), Ok(()));
    assert_eq!(
        key.verify(&EventCursor::parse(minted.as_str()).unwrap()),
        Ok(())
    );
    // Same event id, edited sequence.
    let edited = EventCursor::new([7; 16], 43, minted.event_id());
    assert_eq!(key.verify(&edited), Err(CursorError::Forged));
    assert_eq!(
        CursorKey::new(b"other").verify(&minted),
        Err(CursorError::Forged)
    );
    // Minted event ids are version-8 UUIDs, so they pass the protocol's UUID rule.
    assert!(agentwire_roll::ids::is_protocol_uuid(
        &minted.event_id_text()
    ));
    assert_eq!(CursorError::Forged.code(), "roll.cursor.forged");
}

proptest! {
    #[test]
    fn compare_is_a_total_order_consistent_with_append_order(a in 0u64..1_000_000, b in 0u64..1_000_000, c in 0u64..1_000_000) {
        let key = CursorKey::new(b"k");
        let log = [3; 16];
        let (ca, cb, cc) = (key.mint(log, a), key.mint(log, b), key.mint(log, c));
        let cmp = |x: &EventCursor, y: &EventCursor| compare_event_cursors(Some(x), Some(y)).unwrap();
        prop_assert_eq!(cmp(&ca, &cb), a.cmp(&b));
        prop_assert_eq!(cmp(&cb, &ca), cmp(&ca, &cb).reverse());
        if cmp(&ca, &cb) != Ordering::Greater && cmp(&cb, &cc) != Ordering::Greater {
            prop_assert_ne!(cmp(&ca, &cc), Ordering::Greater);
        }
        let d = |x: Option<&EventCursor>, y: Option<&EventCursor>| event_cursor_distance(x, y).unwrap();
        prop_assert_eq!(d(Some(&ca), Some(&cb)), i128::from(b) - i128::from(a));
        prop_assert_eq!(d(Some(&ca), Some(&cb)) + d(Some(&cb), Some(&cc)), d(Some(&ca), Some(&cc)));
        prop_assert_eq!(d(None, Some(&ca)), i128::from(a) + 1);
        prop_assert_eq!(d(Some(&ca), Some(&cb)).signum(), match cmp(&ca, &cb) { Ordering::Less => 1, Ordering::Equal => 0, Ordering::Greater => -1 });
        prop_assert_eq!(EventCursor::parse(ca.as_str()).unwrap(), ca.clone());
    }

    #[test]
    fn parse_never_panics(text in "rte1:[0-9a-fA-F:-]{0,120}") {
        let _ = EventCursor::parse(&text);
    }
}
