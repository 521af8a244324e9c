//! Unit tests of the scanners, each held against a byte loop or against `serde_json`.

use super::*;

fn whole_value(text: &str) -> bool {
    let b = text.as_bytes();
    value_end(b, skip_ws(b, 0), 127).is_some_and(|end| skip_ws(b, end) == b.len())
}

fn canonical(text: &str) -> bool {
    canonical_end(text.as_bytes(), 0, 63) == Some(text.len())
}

/// `skip_plain` stops exactly at the first byte that needs attention whenever eight bytes are
/// left to read there, and never past it.
#[test]
fn skip_plain_stops_at_the_first_special_byte() {
    let plain = "abcdé日本x ~\u{7f}";
    for special in ["\"", "\\", "\n", "\u{1}", "\u{1f}"] {
        for before in 0..20 {
            for after in 0..12 {
                let text: String = plain.chars().cycle().take(before).collect::<String>()
                    + special
                    + &"z".repeat(after);
                let b = text.as_bytes();
                let first = b
                    .iter()
                    .position(|c| *c == b'"' || *c == b'\\' || *c < 0x20)
                    .unwrap_or(b.len());
                for from in 0..=first {
                    let stop = skip_plain(b, from);
                    assert!(stop <= first, "{text:?} from {from}: {stop} > {first}");
                    if first + 8 <= b.len() {
                        assert_eq!(stop, first, "{text:?} from {from}");
                    }
                }
            }
        }
    }
}

#[test]
fn string_special_finds_what_a_byte_loop_finds() {
    let naive = |b: &[u8], i: usize| {
        b[i..]
            .iter()
            .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
            .map(|p| i + p)
    };
    let texts: [&[u8]; 6] = [
        b"plain text without anything special in it at all....",
        "é中文 and \u{7f}\u{ff} then a quote\" here".as_bytes(),
        b"0123456\\89abcdef",
        b"tab\there and \x01",
        b"\x1f\x20\x21\x22",
        b"",
    ];
    for text in texts {
        for i in 0..=text.len() {
            assert_eq!(string_special(text, i), naive(text, i), "{text:?} at {i}");
        }
    }
}

#[test]
fn whitespace_is_the_four_json_bytes() {
    assert_eq!(skip_ws(b" \t\r\nx", 0), 4);
    assert_eq!(skip_ws(b"  ", 0), 2);
    assert_eq!(skip_ws(b"\x0b", 0), 0);
    assert_eq!(skip_ws(b"a b", 1), 2);
}

#[test]
fn escapes_decode_as_serde_json_decodes_them() {
    for (text, c, len) in [
        (r"\n", '\n', 2),
        (r"\/", '/', 2),
        (r#"\""#, '"', 2),
        (r"\u00e9", 'é', 6),
        (r"\u00E9", 'é', 6),
        (r"\ud83d\ude00", '\u{1F600}', 12),
    ] {
        assert_eq!(escape(text.as_bytes(), 0), Some((c, len)), "{text}");
        let decoded: String = serde_json::from_str(&format!("\"{text}\"")).unwrap_or_default();
        assert_eq!(decoded, c.to_string(), "{text}");
    }
    for bad in [
        r"\x",
        r"\u00",
        r"\u00g0",
        r"\ud800",
        r"\udc00",
        r"\ud800\u0041",
        r"\ud800x",
    ] {
        assert_eq!(escape(bad.as_bytes(), 0), None, "{bad}");
    }
    assert_eq!(hex4(b"fFfF", 0), Some(0xFFFF));
    assert_eq!(hex4(b"+fff", 0), None);
}

#[test]
fn numbers_end_where_the_grammar_ends() {
    for (text, end, integer) in [
        ("0", 1, true),
        ("-12,", 3, true),
        ("0.5]", 3, false),
        ("1e+21", 5, false),
        ("1E5", 3, false),
        ("01", 1, true),
        ("1.5e-7}", 6, false),
        ("-0", 2, true),
    ] {
        assert_eq!(
            number(text.as_bytes(), 0),
            Some(NumberSpan { end, integer }),
            "{text}"
        );
    }
    for bad in ["-", "1.", "1.e3", "1e", "1e+", ".5", "+1", "x"] {
        assert_eq!(number(bad.as_bytes(), 0), None, "{bad}");
        assert!(!valid_number(bad.as_bytes()), "{bad}");
    }
    assert!(valid_number(b"-0.0e0"));
    assert!(!valid_number(b"01"));
}

#[test]
fn strings_end_at_their_closing_quote() {
    for (text, end) in [
        (r#""""#, 2),
        (r#""a\"b" x"#, 6),
        (r#""\u00e9\ud83d\ude00","#, 20),
        ("\"é日本\"", 10),
    ] {
        assert_eq!(string_end(text.as_bytes(), 0), Some(end), "{text}");
    }
    for bad in [
        "\"a\u{1}\"",
        r#""\ud800""#,
        r#""\q""#,
        r#""open"#,
        "x",
        "\"tab\there\"",
    ] {
        assert_eq!(string_end(bad.as_bytes(), 0), None, "{bad}");
    }
}

#[test]
fn the_grammar_is_what_serde_json_reads() {
    for text in [
        r#"{"a":[1,-2.5e3,"x\n\u00e9\ud83d\ude00",true,null,{}]}"#,
        " [ 1 , 2 ] ",
        "0",
        r#""""#,
        "{ \"a\" : { } , \"b\" : [ ] }",
        r#"{"a":1,"a":2}"#,
        "1e400",
        "[1,]",
        "01",
        "1.",
        "-",
        r#""\ud800""#,
        "\"a\u{1}\"",
        "[1] x",
        "",
        "{\"a\"}",
        "{\"a\":}",
        "[1 2]",
        "tru",
        "nul",
        "{,}",
        "[,1]",
        "{\"a\":1,}",
    ] {
        // serde_json's Value keeps the last of duplicate keys and refuses numbers beyond a
        // double: both are grammatical.
        let grammatical = serde_json::from_str::<serde_json::Value>(text).is_ok()
            || text == r#"{"a":1,"a":2}"#
            || text == "1e400";
        assert_eq!(whole_value(text), grammatical, "{text}");
    }
}

#[test]
fn nesting_is_bounded_by_the_levels_left() {
    let nested = |n: usize| format!("{}{}", "[".repeat(n), "]".repeat(n));
    assert_eq!(value_end(nested(3).as_bytes(), 0, 3), Some(6));
    assert_eq!(value_end(nested(4).as_bytes(), 0, 3), None);
    assert_eq!(canonical_end(nested(3).as_bytes(), 0, 3), Some(6));
    assert_eq!(canonical_end(nested(4).as_bytes(), 0, 3), None);
    assert_eq!(value_end(b"1", 0, 0), Some(1));
    assert_eq!(value_end(b"{}", 0, 0), None);
}

#[test]
fn canonical_text_is_what_serde_json_writes() {
    for text in [
        r#"{"a":1,"b":[true,false,null],"c":{"d":"e"}}"#,
        r#""line\nbreak \"quoted\" back\\slash \u0001""#,
        "0",
        "-12",
        "0.5",
        "0.0012",
        "1e+21",
        "1.5e-7",
        "1.0",
        "18446744073709551615",
        "[]",
        "{}",
        r#""é and 中""#,
    ] {
        assert!(canonical(text), "{text}");
        let v: serde_json::Value = serde_json::from_str(text).unwrap_or_default();
        assert_eq!(serde_json::to_string(&v).unwrap_or_default(), text);
    }
}

#[test]
fn other_spellings_are_not_canonical() {
    for text in [
        r#"{"a": 1}"#,
        r#"{"a":1,"a":2}"#,
        r#""\/""#,
        r#""\u00e9""#,
        r#""\u000a""#,
        r#""\u001F""#,
        "-0",
        "01",
        "1e21",
        "1E5",
        "100000000000000000000",
        "1.50",
        "[1,]",
        "{\"a\":1",
        "tru",
    ] {
        assert!(!canonical(text), "{text}");
        assert!(!canonical_number(text.as_bytes()) || text.starts_with(['{', '[', '"']));
    }
}

#[test]
fn canonical_objects_have_a_bounded_member_count() {
    let object = |n: usize| {
        let members: Vec<String> = (0..n).map(|k| format!("\"k{k}\":{k}")).collect();
        format!("{{{}}}", members.join(","))
    };
    assert!(canonical(&object(MAX_CANONICAL_MEMBERS)));
    assert!(!canonical(&object(MAX_CANONICAL_MEMBERS + 1)));
    assert!(whole_value(&object(MAX_CANONICAL_MEMBERS + 1)));
}
