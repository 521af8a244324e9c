//! Byte scanners for JSON text: where the string, number or value starting at a byte ends,
//! whether it is written canonically (exactly as `serde_json` writes it), and the pieces every
//! reader of JSON bytes shares (whitespace, plain string bytes, escapes).
//!
//! The scanners neither allocate nor build values: they answer "where does this end" and "is
//! this well formed", so a reader that keeps spans of its input (the parse tape of
//! `agentwire-schema`, the run-log line reader) decides quickly what it takes as is and what it
//! leaves to a full parser. Input is bytes already checked to be UTF-8; a scanner only looks at
//! the ASCII structure and never splits a multi-byte character.
//!
//! Two grammars share one scanner ([`value_end`], [`canonical_end`]): RFC 8259 JSON with
//! whitespace anywhere between tokens, and canonical text (no whitespace, every string and
//! number spelled the way `serde_json` writes it, no duplicate key), whose bytes equal the
//! compact serialization of the value they parse to.

/// Objects with more members than this are not canonical text for [`canonical_end`]: duplicate
/// keys are checked pairwise, and a caller holding a larger object takes a full parser's path.
pub const MAX_CANONICAL_MEMBERS: usize = 16;

/// The index of the first byte at or after `i` that is not JSON whitespace (space, tab, line
/// feed, carriage return); `b.len()` when there is none.
#[inline]
pub fn skip_ws(b: &[u8], mut i: usize) -> usize {
    while let Some(c) = b.get(i) {
        if matches!(c, b' ' | b'\n' | b'\r' | b'\t') {
            i += 1;
        } else {
            break;
        }
    }
    i
}

/// Skips string bytes that need no attention (not `"`, `\\` or a control character) eight at
/// a time, stopping at the first one that does (or, within the input's last 7 bytes, at or
/// before it).
#[inline]
pub fn skip_plain(b: &[u8], mut i: usize) -> usize {
    const ONES: u64 = 0x0101_0101_0101_0101;
    const HIGH: u64 = 0x8080_8080_8080_8080;
    while let Some(chunk) = b.get(i..i + 8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(chunk);
        let w = u64::from_le_bytes(word);
        let quote = w ^ (ONES * u64::from(b'"'));
        let slash = w ^ (ONES * u64::from(b'\\'));
        // A zero byte in `quote`/`slash` marks a `"`/`\\`; `w - 0x20` borrowing marks a byte
        // below 0x20. Borrows may flag later bytes too, which only ends the fast scan early.
        let special = (quote.wrapping_sub(ONES) & !quote)
            | (slash.wrapping_sub(ONES) & !slash)
            | (w.wrapping_sub(ONES * 0x20) & !w);
        if special & HIGH != 0 {
            // False marks only ever follow a true one (a borrow runs towards later bytes), so
            // the first mark is the first byte that needs attention.
            return i + ((special & HIGH).trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// The index of the first `"`, `\\` or control character (below 0x20) at or after `i`: the
/// bytes a JSON string's body cannot hold as they are. Eight bytes at a time, then byte by byte
/// in the input's last seven.
#[inline]
pub fn string_special(b: &[u8], i: usize) -> Option<usize> {
    let i = skip_plain(b, i);
    b.get(i..)?
        .iter()
        .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
        .map(|p| i + p)
}

/// The value of the four hex digits (either case) at `at`.
#[inline]
pub fn hex4(b: &[u8], at: usize) -> Option<u32> {
    let digits = b.get(at..at + 4)?;
    let mut v = 0u32;
    for d in digits {
        v = v * 16 + (*d as char).to_digit(16)?;
    }
    Some(v)
}

/// The escape whose backslash is at `i`: the character it stands for and how many bytes it
/// spans (2 for `\n`, 6 for `\u00e9`, 12 for a surrogate pair). `None` for an escape JSON does
/// not have, and for a `\u` surrogate that is not a high one followed by a low one (it stands
/// for no character, and the strict parser rejects it).
#[inline]
pub fn escape(b: &[u8], i: usize) -> Option<(char, usize)> {
    let c = match *b.get(i + 1)? {
        b'"' => '"',
        b'\\' => '\\',
        b'/' => '/',
        b'b' => '\u{8}',
        b'f' => '\u{c}',
        b'n' => '\n',
        b'r' => '\r',
        b't' => '\t',
        b'u' => {
            let hi = hex4(b, i + 2)?;
            if !(0xD800..0xDC00).contains(&hi) {
                return Some((char::from_u32(hi)?, 6));
            }
            if b.get(i + 6) != Some(&b'\\') || b.get(i + 7) != Some(&b'u') {
                return None;
            }
            let lo = hex4(b, i + 8)?;
            if !(0xDC00..0xE000).contains(&lo) {
                return None;
            }
            let c = char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?;
            return Some((c, 12));
        }
        _ => return None,
    };
    Some((c, 2))
}

/// Where the string whose opening quote is at `pos` ends (just past its closing quote), when it
/// is a JSON string: every escape one JSON has (surrogates in pairs), no raw control character.
#[inline]
pub fn string_end(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let mut i = pos + 1;
    loop {
        i = string_special(b, i)?;
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => i += escape(b, i)?.1,
            _ => return None,
        }
    }
}

/// Where the string whose opening quote is at `pos` ends (just past its closing quote), when it
/// is spelled the way `serde_json` writes it: its only escapes are `\"`, `\\`, `\b`, `\f`,
/// `\n`, `\r`, `\t`, and `\u00XX` in lower-case hex for the other control characters, and it
/// holds no raw control character.
#[inline]
pub fn canonical_string_end(b: &[u8], pos: usize) -> Option<usize> {
    if b.get(pos) != Some(&b'"') {
        return None;
    }
    let mut i = pos + 1;
    loop {
        i = string_special(b, i)?;
        match b[i] {
            b'"' => return Some(i + 1),
            b'\\' => match *b.get(i + 1)? {
                b'"' | b'\\' | b'b' | b'f' | b'n' | b'r' | b't' => i += 2,
                b'u' => {
                    let hex = b.get(i + 2..i + 6)?;
                    let canonical = hex[0] == b'0'
                        && hex[1] == b'0'
                        && matches!(hex[2], b'0' | b'1')
                        && matches!(hex[3], b'0'..=b'9' | b'a'..=b'f')
                        && !matches!((hex[2], hex[3]), (b'0', b'8' | b'9' | b'a' | b'c' | b'd'));
                    if !canonical {
                        return None;
                    }
                    i += 6;
                }
                _ => return None,
            },
            _ => return None,
        }
    }
}

/// Where a number ends, and whether it is an integer as written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NumberSpan {
    /// Just past the number's last byte.
    pub end: usize,
    /// Written without a fraction or an exponent (an optional `-` and digits only).
    pub integer: bool,
}

/// The number at `pos` by JSON's grammar, `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]?
/// [0-9]+)?`, read as far as the grammar goes: `None` when no number starts there or a
/// fraction or exponent has no digits. Whether the value fits a double is the caller's
/// question.
#[inline]
pub fn number(b: &[u8], pos: usize) -> Option<NumberSpan> {
    let digits = |mut i: usize| {
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        i
    };
    let mut i = pos;
    if b.get(i) == Some(&b'-') {
        i += 1;
    }
    match b.get(i) {
        Some(b'0') => i += 1,
        Some(b'1'..=b'9') => i = digits(i + 1),
        _ => return None,
    }
    let mut integer = true;
    if b.get(i) == Some(&b'.') {
        integer = false;
        let s = i + 1;
        i = digits(s);
        if i == s {
            return None;
        }
    }
    if matches!(b.get(i), Some(b'e' | b'E')) {
        integer = false;
        i += 1;
        if matches!(b.get(i), Some(b'+' | b'-')) {
            i += 1;
        }
        let s = i;
        i = digits(s);
        if i == s {
            return None;
        }
    }
    Some(NumberSpan { end: i, integer })
}

/// Whether `t` is exactly one number by JSON's grammar.
#[inline]
pub fn valid_number(t: &[u8]) -> bool {
    number(t, 0).is_some_and(|n| n.end == t.len())
}

/// Whether number text is written the way `serde_json` writes the number it parses to: an
/// integer without sign noise or leading zeros that fits `u64`/`i64`, or a float whose shortest
/// round-trip form is the text itself.
pub fn canonical_number(t: &[u8]) -> bool {
    let digits = t.strip_prefix(b"-").unwrap_or(t);
    if digits.is_empty() || !digits.iter().all(u8::is_ascii_digit) {
        return canonical_float(t);
    }
    if digits.len() > 1 && digits[0] == b'0' {
        return false;
    }
    // `-0` reads as the float -0.0, written `-0.0`.
    if t[0] == b'-' {
        return digits != b"0" && std::str::from_utf8(t).is_ok_and(|s| s.parse::<i64>().is_ok());
    }
    std::str::from_utf8(t).is_ok_and(|s| s.parse::<u64>().is_ok())
}

fn canonical_float(t: &[u8]) -> bool {
    let Ok(s) = std::str::from_utf8(t) else {
        return false;
    };
    if !valid_number(t) {
        return false;
    }
    match s.parse::<f64>() {
        // Compared with serde_json's own writing, whatever float formatter it uses.
        Ok(f) if f.is_finite() => serde_json::to_string(&f).is_ok_and(|w| w == s),
        _ => false,
    }
}

/// Where `word` (`true`, `false`, `null`) ends when it is written at `pos`.
#[inline]
pub fn literal_end(b: &[u8], pos: usize, word: &[u8]) -> Option<usize> {
    b.get(pos..)?.starts_with(word).then_some(pos + word.len())
}

/// Where the JSON value starting at `pos` ends (whitespace inside it allowed, none before it),
/// when it is RFC 8259 JSON with at most `depth_left` levels of nested arrays and objects;
/// `None` when it is not. Duplicate keys and numbers beyond a double are grammatical and pass:
/// they are the strict parser's rules, not the grammar's.
pub fn value_end(b: &[u8], pos: usize, depth_left: usize) -> Option<usize> {
    scan::<false>(b, pos, depth_left)
}

/// Where the JSON value starting at `pos` ends, when it is canonical text: written exactly as
/// `serde_json` writes the value it parses to (no whitespace, strings and numbers as
/// [`canonical_string_end`] and [`canonical_number`] accept them), with no duplicate key, no
/// object of more than [`MAX_CANONICAL_MEMBERS`] members and at most `depth_left` levels of
/// nested arrays and objects. Its bytes can then be kept as the value's compact text.
pub fn canonical_end(b: &[u8], pos: usize, depth_left: usize) -> Option<usize> {
    scan::<true>(b, pos, depth_left)
}

/// The one value scanner behind [`value_end`] (`CANONICAL` false) and [`canonical_end`].
fn scan<const CANONICAL: bool>(b: &[u8], pos: usize, depth_left: usize) -> Option<usize> {
    let ws = |i: usize| if CANONICAL { i } else { skip_ws(b, i) };
    let string = |i: usize| {
        if CANONICAL {
            canonical_string_end(b, i)
        } else {
            string_end(b, i)
        }
    };
    match *b.get(pos)? {
        b'"' => string(pos),
        b'{' => {
            let depth_left = depth_left.checked_sub(1)?;
            let mut keys = [(0usize, 0usize); MAX_CANONICAL_MEMBERS];
            let mut n = 0;
            let mut i = ws(pos + 1);
            if *b.get(i)? == b'}' {
                return Some(i + 1);
            }
            loop {
                let key_end = string(i)?;
                if CANONICAL {
                    // Canonical strings have one spelling each, so equal keys are equal bytes.
                    let key = &b[i..key_end];
                    if n == MAX_CANONICAL_MEMBERS || keys[..n].iter().any(|&(s, e)| &b[s..e] == key)
                    {
                        return None;
                    }
                    keys[n] = (i, key_end);
                    n += 1;
                }
                i = ws(key_end);
                if *b.get(i)? != b':' {
                    return None;
                }
                i = ws(scan::<CANONICAL>(b, ws(i + 1), depth_left)?);
                match *b.get(i)? {
                    b',' => i = ws(i + 1),
                    b'}' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b'[' => {
            let depth_left = depth_left.checked_sub(1)?;
            let mut i = ws(pos + 1);
            if *b.get(i)? == b']' {
                return Some(i + 1);
            }
            loop {
                i = ws(scan::<CANONICAL>(b, i, depth_left)?);
                match *b.get(i)? {
                    b',' => i = ws(i + 1),
                    b']' => return Some(i + 1),
                    _ => return None,
                }
            }
        }
        b't' => literal_end(b, pos, b"true"),
        b'f' => literal_end(b, pos, b"false"),
        b'n' => literal_end(b, pos, b"null"),
        b'-' | b'0'..=b'9' => {
            let end = number(b, pos)?.end;
            (!CANONICAL || canonical_number(&b[pos..end])).then_some(end)
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests;
