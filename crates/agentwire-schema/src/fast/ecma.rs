//! ECMA-262 semantics on the Rust side: `pattern` sources (JavaScript `RegExp` with the `u`
//! flag, as AJV compiles them) translated into Rust regex syntax, and the string formats of
//! `ajv-formats` ("full" mode) checked the way it checks them.

use std::collections::HashMap;
use std::fmt;

/// JavaScript's `\s`: WhiteSpace and LineTerminator code points (not the Unicode White_Space
/// property that Rust's `\s` uses: that one has U+0085 and lacks U+FEFF).
const JS_SPACE: &str = r"\t\n\x{0B}\x{0C}\r \x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}\x{FEFF}";

/// A compiled `pattern`: the plain regex engine when the source needs no backtracking
/// features, fancy-regex (lookaround, backreferences) otherwise.
pub(crate) enum Pattern {
    Plain(regex::Regex),
    Fancy(fancy_regex::Regex),
}

impl fmt::Debug for Pattern {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Pattern::Plain(r) => write!(f, "Plain({})", r.as_str()),
            Pattern::Fancy(r) => write!(f, "Fancy({})", r.as_str()),
        }
    }
}

/// Upper bound of the compiled size of one pattern, so that a hostile schema cannot make
/// compilation eat memory.
const REGEX_SIZE_LIMIT: usize = 8 << 20;

/// Backtracking steps a pattern that needs a backtracking engine (backreferences, lookaround)
/// may take per match before giving up. A give-up is neither a match nor a non-match:
/// [`Pattern::is_match`] answers `None`, and the value is invalid with its own issue code
/// (`validate.pattern-budget`). Every other pattern runs on the linear-time `regex` engine.
pub const PATTERN_BACKTRACK_LIMIT: usize = 1_000_000;

impl Pattern {
    pub(crate) fn new(source: &str) -> Result<Pattern, String> {
        let translated = translate(source)?;
        match regex::RegexBuilder::new(&translated)
            .size_limit(REGEX_SIZE_LIMIT)
            .build()
        {
            Ok(r) => Ok(Pattern::Plain(r)),
            Err(_) => fancy_regex::RegexBuilder::new(&translated)
                .backtrack_limit(PATTERN_BACKTRACK_LIMIT)
                .delegate_size_limit(REGEX_SIZE_LIMIT)
                .build()
                .map(Pattern::Fancy)
                .map_err(|e| e.to_string()),
        }
    }

    /// Whether the pattern matches somewhere in `s`; `None` when the backtracking budget ran out.
    pub(crate) fn is_match(&self, s: &str) -> Option<bool> {
        match self {
            Pattern::Plain(r) => Some(r.is_match(s)),
            Pattern::Fancy(r) => r.is_match(s).ok(),
        }
    }
}

/// A Rust class that matches no character.
const NOTHING: &str = r"[^\x{0}-\x{10FFFF}]";

fn is_surrogate(c: u32) -> bool {
    (0xD800..=0xDFFF).contains(&c)
}

/// The capturing groups of a pattern, in their ECMA-262 numbering (named groups are numbered
/// too), and where lookbehinds are: what a backreference's translation depends on.
struct Groups {
    /// Per group number − 1: the index of its `(` and its name.
    opens: Vec<(usize, Option<String>)>,
    /// `(start, end)` char ranges of lookbehind assertions.
    lookbehinds: Vec<(usize, usize)>,
}

impl Groups {
    fn scan(chars: &[char]) -> Groups {
        let mut opens = Vec::new();
        let mut lookbehinds = Vec::new();
        // Per open parenthesis: whether it starts a lookbehind, and where.
        let mut stack: Vec<Option<usize>> = Vec::new();
        let mut in_class = false;
        let mut i = 0;
        while i < chars.len() {
            match chars[i] {
                '\\' => i += 1,
                '[' if !in_class => in_class = true,
                ']' if in_class => in_class = false,
                '(' if !in_class => {
                    let next = |k: usize| chars.get(i + k).copied();
                    match (next(1), next(2), next(3)) {
                        (Some('?'), Some('<'), Some('=' | '!')) => stack.push(Some(i)),
                        (Some('?'), Some('<'), _) => {
                            let name: String =
                                chars[i + 3..].iter().take_while(|c| **c != '>').collect();
                            opens.push((i, Some(name)));
                            stack.push(None);
                        }
                        (Some('?'), _, _) => stack.push(None),
                        _ => {
                            opens.push((i, None));
                            stack.push(None);
                        }
                    }
                }
                ')' if !in_class => {
                    if let Some(Some(start)) = stack.pop() {
                        lookbehinds.push((start, i));
                    }
                }
                _ => {}
            }
            i += 1;
        }
        Groups { opens, lookbehinds }
    }

    /// The Rust text of the backreference at `chars[i] == '\\'` (`\N` or `\k<name>`, outside
    /// a class), and how many chars it used; `None` when it is not one. ECMA-262 matches a
    /// reference to a group that has not participated as the empty string, where Rust's
    /// backtracking engine fails it: a reference to a group that opens later (outside a
    /// lookbehind) is always empty, and any other one is empty unless its group matched. A
    /// reference inside a lookbehind is an error: ECMA-262 matches a lookbehind backwards, so
    /// the reference sees the groups to its right, and the backtracking engine matches it
    /// forwards.
    fn backreference(&self, chars: &[char], i: usize) -> Option<Result<(String, usize), String>> {
        let (group, used) = match chars.get(i + 1)? {
            '1'..='9' => {
                let digits: String = chars[i + 1..]
                    .iter()
                    .take_while(|c| c.is_ascii_digit())
                    .collect();
                (digits.parse::<usize>().ok()?, digits.len() + 1)
            }
            'k' if chars.get(i + 2) == Some(&'<') => {
                let name: String = chars[i + 3..].iter().take_while(|c| **c != '>').collect();
                let number = self
                    .opens
                    .iter()
                    .position(|(_, n)| n.as_deref() == Some(name.as_str()))?;
                (number + 1, name.chars().count() + 4)
            }
            _ => return None,
        };
        let (open, _) = self.opens.get(group.checked_sub(1)?)?;
        if self.lookbehinds.iter().any(|(s, e)| (*s..=*e).contains(&i)) {
            return Some(Err(
                "a backreference inside a lookbehind, which ECMA-262 matches backwards".to_owned(),
            ));
        }
        if *open > i {
            return Some(Ok(("(?:)".to_owned(), used)));
        }
        Some(Ok((format!("(?({group})\\{group}|)"), used)))
    }
}

/// Translates a JavaScript `u`-mode pattern into Rust regex syntax.
pub(crate) fn translate(source: &str) -> Result<String, String> {
    let chars: Vec<char> = source.chars().collect();
    let groups = Groups::scan(&chars);
    let mut out = String::with_capacity(source.len() + 16);
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                if let Some(reference) = groups.backreference(&chars, i) {
                    let (piece, used) = reference?;
                    out.push_str(&piece);
                    i += used;
                    continue;
                }
                let (piece, used) = escape(&chars, i, false)?;
                match piece {
                    Escaped::Text(t) => out.push_str(&t),
                    // A lone surrogate matches only a lone surrogate code unit, which no
                    // string of a strictly parsed document has: it matches nothing.
                    Escaped::Code(cp) if is_surrogate(cp) => out.push_str(NOTHING),
                    Escaped::Code(cp) => out.push_str(&format!("\\x{{{cp:X}}}")),
                }
                i += used;
            }
            '[' => {
                let (class, used) = class(&chars, i)?;
                out.push_str(&class);
                i += used;
            }
            '.' => {
                out.push_str(r"[^\n\r\x{2028}\x{2029}]");
                i += 1;
            }
            '(' if chars.get(i + 1) == Some(&'?') && chars.get(i + 2) == Some(&'<') => {
                // Named groups: `(?<name>` is accepted by both; lookbehind `(?<=`/`(?<!` too.
                out.push_str("(?<");
                i += 3;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Ok(out)
}

enum Escaped {
    /// Rust regex text to emit as is.
    Text(String),
    /// One code point.
    Code(u32),
}

fn hex(chars: &[char], from: usize, n: usize) -> Option<u32> {
    let s: String = chars.get(from..from + n)?.iter().collect();
    if s.len() != n || !s.chars().all(|c| c.is_ascii_hexdigit()) {
        return None;
    }
    u32::from_str_radix(&s, 16).ok()
}

/// One escape at `chars[i] == '\\'`; returns what it stands for and how many chars it used.
fn escape(chars: &[char], i: usize, in_class: bool) -> Result<(Escaped, usize), String> {
    let Some(&e) = chars.get(i + 1) else {
        return Err("pattern ends with a backslash".to_owned());
    };
    let text = |s: &str| Ok((Escaped::Text(s.to_owned()), 2));
    match e {
        'd' => text(if in_class { "0-9" } else { "[0-9]" }),
        'w' => text(if in_class {
            "A-Za-z0-9_"
        } else {
            "[A-Za-z0-9_]"
        }),
        's' => {
            if in_class {
                text(JS_SPACE)
            } else {
                Ok((Escaped::Text(format!("[{JS_SPACE}]")), 2))
            }
        }
        // Rust classes nest: `[a[^0-9]]` is `a` or a non-digit.
        'D' if in_class => text("[^0-9]"),
        'W' if in_class => text("[^A-Za-z0-9_]"),
        'S' if in_class => Ok((Escaped::Text(format!("[^{JS_SPACE}]")), 2)),
        'D' => text("[^0-9]"),
        'W' => text("[^A-Za-z0-9_]"),
        'S' => Ok((Escaped::Text(format!("[^{JS_SPACE}]")), 2)),
        'b' if in_class => Ok((Escaped::Code(8), 2)),
        // Without the `i` flag ECMA-262 word characters are `[A-Za-z0-9_]`: Rust's ASCII
        // boundaries.
        'b' => text(r"(?-u:\b)"),
        'B' => text(r"(?-u:\B)"),
        'n' => Ok((Escaped::Code(10), 2)),
        'r' => Ok((Escaped::Code(13), 2)),
        't' => Ok((Escaped::Code(9), 2)),
        'f' => Ok((Escaped::Code(12), 2)),
        'v' => Ok((Escaped::Code(11), 2)),
        '0' if !chars.get(i + 2).is_some_and(char::is_ascii_digit) => Ok((Escaped::Code(0), 2)),
        'x' => {
            let cp = hex(chars, i + 2, 2).ok_or("bad \\x escape")?;
            Ok((Escaped::Code(cp), 4))
        }
        'u' => {
            if chars.get(i + 2) == Some(&'{') {
                let end = chars[i + 3..]
                    .iter()
                    .position(|c| *c == '}')
                    .ok_or("bad \\u{} escape")?;
                let cp = hex(chars, i + 3, end).ok_or("bad \\u{} escape")?;
                return Ok((Escaped::Code(cp), end + 4));
            }
            let cp = hex(chars, i + 2, 4).ok_or("bad \\u escape")?;
            if (0xD800..=0xDBFF).contains(&cp)
                && chars.get(i + 6) == Some(&'\\')
                && chars.get(i + 7) == Some(&'u')
                && let Some(lo) = hex(chars, i + 8, 4).filter(|lo| (0xDC00..=0xDFFF).contains(lo))
            {
                return Ok((
                    Escaped::Code(0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00)),
                    12,
                ));
            }
            Ok((Escaped::Code(cp), 6))
        }
        'c' => {
            let l = chars
                .get(i + 2)
                .filter(|c| c.is_ascii_alphabetic())
                .ok_or("bad \\c escape")?;
            Ok((Escaped::Code(*l as u32 % 32), 3))
        }
        '1'..='9' if !in_class => {
            let mut n = 2;
            while chars.get(i + n).is_some_and(char::is_ascii_digit) {
                n += 1;
            }
            let digits: String = chars[i + 1..i + n].iter().collect();
            Ok((Escaped::Text(format!("\\{digits}")), n))
        }
        'k' => {
            if chars.get(i + 2) != Some(&'<') {
                return Err("bad \\k escape".to_owned());
            }
            let end = chars[i + 3..]
                .iter()
                .position(|c| *c == '>')
                .ok_or("bad \\k escape")?;
            let body: String = chars[i..i + end + 4].iter().collect();
            Ok((Escaped::Text(body), end + 4))
        }
        'p' | 'P' => {
            // \p{...}: Unicode property escapes; Rust accepts the common names.
            if chars.get(i + 2) != Some(&'{') {
                return Err("bad \\p escape".to_owned());
            }
            let end = chars[i + 3..]
                .iter()
                .position(|c| *c == '}')
                .ok_or("bad \\p escape")?;
            let body: String = chars[i..i + end + 4].iter().collect();
            if regex_syntax::Parser::new().parse(&body).is_ok() {
                return Ok((Escaped::Text(body), end + 4));
            }
            // A property ECMA-262 knows and Rust's regex does not (`Changes_When_NFKC_Casefolded`):
            // the same code points as an explicit class, so the pattern stays linear-time.
            let name: String = chars[i + 3..i + 3 + end].iter().collect();
            Ok((Escaped::Text(property_class(&name, e == 'P')?), end + 4))
        }
        c if c.is_ascii_punctuation() => {
            // In `u` mode only syntax characters (and `-` in classes, `/`) may be escaped.
            if c == '/' {
                Ok((Escaped::Code('/' as u32), 2))
            } else {
                Ok((Escaped::Text(format!("\\{c}")), 2))
            }
        }
        other => Err(format!("unknown escape \\{other}")),
    }
}

/// The code points of the ECMA-262 property `\p{name}` (of its complement when `negated`) as a
/// Rust class (a nested class is allowed inside another), found by running the ECMA-262 engine
/// over every scalar value once; remembered per name and sign.
fn property_class(name: &str, negated: bool) -> Result<String, String> {
    static CLASSES: std::sync::OnceLock<std::sync::Mutex<HashMap<(String, bool), String>>> =
        std::sync::OnceLock::new();
    let classes = CLASSES.get_or_init(Default::default);
    let key = (name.to_owned(), negated);
    if let Some(class) = classes.lock().ok().and_then(|m| m.get(&key).cloned()) {
        return Ok(class);
    }
    let ecma = regress::Regex::with_flags(&format!("\\p{{{name}}}"), "u")
        .map_err(|e| format!("unknown property \\p{{{name}}}: {e}"))?;
    let every: String = (0..=0x10FFFF_u32).filter_map(char::from_u32).collect();
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for m in ecma.find_iter(&every) {
        let Some(c) = every[m.start()..].chars().next() else {
            continue;
        };
        let cp = c as u32;
        match ranges.last_mut() {
            // Surrogates are not scalar values: a range may step over them.
            Some((_, hi)) if *hi + 1 == cp || (*hi == 0xD7FF && cp == 0xE000) => *hi = cp,
            _ => ranges.push((cp, cp)),
        }
    }
    if negated {
        let mut complement = Vec::new();
        let mut next = 0u32;
        for &(lo, hi) in &ranges {
            if lo > next {
                complement.push((next, lo - 1));
            }
            next = hi + 1;
        }
        if next <= 0x10FFFF {
            complement.push((next, 0x10FFFF));
        }
        ranges = complement;
    }
    // Ends that are surrogates (a complement's) move to the nearest scalar value.
    let ranges: Vec<(u32, u32)> = ranges
        .into_iter()
        .map(|(lo, hi)| {
            let lo = if is_surrogate(lo) { 0xE000 } else { lo };
            let hi = if is_surrogate(hi) { 0xD7FF } else { hi };
            (lo, hi)
        })
        .filter(|(lo, hi)| lo <= hi)
        .collect();
    let class = if ranges.is_empty() {
        NOTHING.to_owned()
    } else {
        let mut class = String::from("[");
        for (lo, hi) in ranges {
            class.push_str(&format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"));
        }
        class.push(']');
        class
    };
    if let Ok(mut m) = classes.lock() {
        m.insert(key, class.clone());
    }
    Ok(class)
}

/// One character class at `chars[i] == '['`; returns Rust syntax and chars used.
fn class(chars: &[char], start: usize) -> Result<(String, usize), String> {
    let mut i = start + 1;
    let negated = chars.get(i) == Some(&'^');
    if negated {
        i += 1;
    }
    // Items: either a code point (possibly a range end) or a text fragment.
    let mut items: Vec<Result<u32, String>> = Vec::new();
    loop {
        let Some(&c) = chars.get(i) else {
            return Err("unterminated character class".to_owned());
        };
        if c == ']' {
            i += 1;
            break;
        }
        if c == '\\' {
            let (piece, used) = escape(chars, i, true)?;
            items.push(match piece {
                Escaped::Code(cp) => Ok(cp),
                Escaped::Text(t) => Err(t),
            });
            i += used;
        } else {
            items.push(Ok(c as u32));
            i += 1;
        }
    }
    // Ranges: `a-b` where both ends are code points.
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    let mut texts: Vec<String> = Vec::new();
    let mut k = 0;
    while k < items.len() {
        match &items[k] {
            Ok(lo)
                if items.get(k + 1) == Some(&Ok('-' as u32))
                    && matches!(items.get(k + 2), Some(Ok(_))) =>
            {
                let Some(Ok(hi)) = items.get(k + 2) else {
                    return Err("character class range".to_owned());
                };
                if hi < lo {
                    return Err("character class range out of order".to_owned());
                }
                ranges.push((*lo, *hi));
                k += 3;
            }
            Ok(cp) => {
                ranges.push((*cp, *cp));
                k += 1;
            }
            Err(t) => {
                texts.push(t.clone());
                k += 1;
            }
        }
    }
    // Surrogate code points never occur in a Rust string: drop them from the ranges.
    let mut kept = Vec::new();
    for (lo, hi) in ranges {
        if lo < 0xD800 {
            kept.push((lo, hi.min(0xD7FF)));
        }
        if hi > 0xDFFF {
            kept.push((lo.max(0xE000), hi));
        }
    }
    let mut body = String::new();
    for (lo, hi) in &kept {
        if lo == hi {
            body.push_str(&format!("\\x{{{lo:X}}}"));
        } else {
            body.push_str(&format!("\\x{{{lo:X}}}-\\x{{{hi:X}}}"));
        }
    }
    for t in texts {
        body.push_str(&t);
    }
    let out = match (negated, body.is_empty()) {
        // Matches nothing / anything.
        (false, true) => NOTHING.to_owned(),
        (true, true) => r"[\x{0}-\x{10FFFF}]".to_owned(),
        (false, false) => format!("[{body}]"),
        (true, false) => format!("[^{body}]"),
    };
    Ok((out, i - start))
}

/// The `format` values checked, with `ajv-formats` full-mode semantics.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Format {
    DateTime,
    Date,
    Time,
    Uuid,
    Email,
    Uri,
    Ipv4,
}

impl Format {
    pub(crate) fn from_name(name: &str) -> Option<Format> {
        Some(match name {
            "date-time" => Format::DateTime,
            "date" => Format::Date,
            "time" => Format::Time,
            "uuid" => Format::Uuid,
            "email" => Format::Email,
            "uri" => Format::Uri,
            "ipv4" => Format::Ipv4,
            _ => return None,
        })
    }
}

pub(crate) fn format_is_valid(format: Format, s: &str) -> bool {
    match format {
        Format::DateTime => date_time(s),
        Format::Date => date(s),
        Format::Time => time(s, true),
        Format::Uuid => uuid(s),
        Format::Email => email(s),
        Format::Uri => uri(s),
        Format::Ipv4 => ipv4(s),
    }
}

fn digits(s: &[u8]) -> Option<u32> {
    if s.is_empty() || !s.iter().all(u8::is_ascii_digit) {
        return None;
    }
    s.iter().try_fold(0u32, |acc, d| {
        acc.checked_mul(10)?.checked_add(u32::from(d - b'0'))
    })
}

fn is_leap(year: u32) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// `YYYY-MM-DD` with a real day of the month.
fn date(s: &str) -> bool {
    let b = s.as_bytes();
    if b.len() != 10 || b[4] != b'-' || b[7] != b'-' {
        return false;
    }
    let (Some(y), Some(m), Some(d)) = (digits(&b[0..4]), digits(&b[5..7]), digits(&b[8..10]))
    else {
        return false;
    };
    const DAYS: [u32; 13] = [0, 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];
    (1..=12).contains(&m)
        && d >= 1
        && d <= if m == 2 && is_leap(y) {
            29
        } else {
            DAYS[m as usize]
        }
}

/// `HH:MM:SS(.frac)?(z|±HH(:?MM)?)?`, the time zone mandatory when `strict_tz`.
fn time(s: &str, strict_tz: bool) -> bool {
    let b = s.as_bytes();
    if b.len() < 8 || b[2] != b':' || b[5] != b':' {
        return false;
    }
    let (Some(hr), Some(min)) = (digits(&b[0..2]), digits(&b[3..5])) else {
        return false;
    };
    if digits(&b[6..8]).is_none() {
        return false;
    }
    let mut i = 8;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    // AJV reads the seconds with their fraction as one number (`+"59.5"`).
    let Ok(sec) = s[6..i].parse::<f64>() else {
        return false;
    };
    let (tz, sign, tz_h, tz_m) = match b.get(i) {
        None => (false, 1i32, 0u32, 0u32),
        Some(b'z' | b'Z') if i + 1 == b.len() => (true, 1, 0, 0),
        Some(c @ (b'+' | b'-')) => {
            let sign = if *c == b'-' { -1 } else { 1 };
            let rest = &b[i + 1..];
            let (h, m) = match rest.len() {
                2 => (digits(rest), Some(0)),
                4 => (digits(&rest[0..2]), digits(&rest[2..4])),
                5 if rest[2] == b':' => (digits(&rest[0..2]), digits(&rest[3..5])),
                _ => return false,
            };
            let (Some(h), Some(m)) = (h, m) else {
                return false;
            };
            (true, sign, h, m)
        }
        _ => return false,
    };
    if tz_h > 23 || tz_m > 59 || (strict_tz && !tz) {
        return false;
    }
    if hr <= 23 && min <= 59 && sec < 60.0 {
        return true;
    }
    let utc_min = min as i32 - tz_m as i32 * sign;
    let utc_hr = hr as i32 - tz_h as i32 * sign - i32::from(utc_min < 0);
    (utc_hr == 23 || utc_hr == -1) && (utc_min == 59 || utc_min == -1) && sec < 61.0
}

fn is_js_space(c: char) -> bool {
    matches!(
        c,
        '\t' | '\n' | '\u{0B}' | '\u{0C}' | '\r' | ' ' | '\u{A0}' | '\u{1680}' | '\u{2000}'
            ..='\u{200A}'
                | '\u{2028}'
                | '\u{2029}'
                | '\u{202F}'
                | '\u{205F}'
                | '\u{3000}'
                | '\u{FEFF}'
    )
}

/// `date` and `time` separated by `t`, `T` or one JavaScript whitespace character, the
/// separator occurring exactly once (AJV splits on it and wants two parts).
fn date_time(s: &str) -> bool {
    let mut parts = s.split(|c: char| c == 't' || c == 'T' || is_js_space(c));
    let (Some(d), Some(t), None) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    date(d) && time(t, true)
}

fn uuid(s: &str) -> bool {
    let b = s.as_bytes();
    let b = if b.len() == 45 && b[..9].eq_ignore_ascii_case(b"urn:uuid:") {
        &b[9..]
    } else {
        b
    };
    b.len() == 36
        && b.iter().enumerate().all(|(i, c)| match i {
            8 | 13 | 18 | 23 => *c == b'-',
            _ => c.is_ascii_hexdigit(),
        })
}

fn email(s: &str) -> bool {
    let Some((local, domain)) = s.split_once('@') else {
        return false;
    };
    let local_ok = !local.is_empty()
        && local
            .bytes()
            .all(|c| c.is_ascii_alphanumeric() || b".!#$%&'*+/=?^_`{|}~-".contains(&c));
    local_ok
        && domain.split('.').all(|label| {
            let b = label.as_bytes();
            !b.is_empty()
                && b.len() <= 63
                && b[0].is_ascii_alphanumeric()
                && b[b.len() - 1].is_ascii_alphanumeric()
                && b.iter().all(|c| c.is_ascii_alphanumeric() || *c == b'-')
        })
}

/// `^(?:[a-z][a-z0-9+\-.]*:)(?:\/?\/)?[^\s]*$` case-insensitively.
fn uri(s: &str) -> bool {
    let Some(colon) = s.find(':') else {
        return false;
    };
    let scheme = &s.as_bytes()[..colon];
    !scheme.is_empty()
        && scheme[0].is_ascii_alphabetic()
        && scheme
            .iter()
            .all(|c| c.is_ascii_alphanumeric() || b"+-.".contains(c))
        && !s[colon + 1..].chars().any(is_js_space)
}

/// Dotted quad, each part 0..=255 without leading zeros.
fn ipv4(s: &str) -> bool {
    let parts: Vec<&str> = s.split('.').collect();
    parts.len() == 4
        && parts.iter().all(|p| {
            let b = p.as_bytes();
            !b.is_empty()
                && b.len() <= 3
                && b.iter().all(u8::is_ascii_digit)
                && (b.len() == 1 || b[0] != b'0')
                && digits(b).is_some_and(|v| v <= 255)
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(p: &str, s: &str) -> bool {
        Pattern::new(p).unwrap().is_match(s).unwrap()
    }

    #[test]
    fn classes_follow_javascript() {
        assert!(m(r"^\d+$", "123"));
        assert!(!m(r"^\d+$", "١٢٣"));
        assert!(m(r"^\S(?:.*\S)?$", "a b"));
        assert!(!m(r"^.$", "\u{2028}"));
        assert!(m(r"^\s$", "\u{FEFF}"));
        assert!(!m(r"^\s$", "\u{85}"));
        assert!(m(r"^[^\s\u0000-\u001f\u007f-\u009f]+$", "abc"));
        assert!(!m(r"^[^\s\u0000-\u001f\u007f-\u009f]+$", "a\u{1}"));
    }

    #[test]
    fn surrogate_ranges_and_lookahead() {
        let p = r"^(?!\.{1,2}$)(?:[^\uD800-\uDFFF]|[\uD800-\uDBFF][\uDC00-\uDFFF])+$";
        assert!(m(p, "file😀"));
        assert!(!m(p, ".."));
        assert!(m(p, "..."));
        assert!(m(r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$", "a-b"));
        assert!(!m(
            r"^(?!.*--)[a-z0-9](?:[a-z0-9-]{0,62}[a-z0-9])?$",
            "a--b"
        ));
    }

    #[test]
    fn formats_match_ajv_formats() {
        assert!(date_time("2026-01-31T10:00:00Z"));
        assert!(date_time("2026-01-31t10:00:00.5+01:00"));
        assert!(date_time("2026-01-31 10:00:00+0100"));
        assert!(!date_time("2026-01-31T10:00:00"));
        assert!(!date_time("2026-02-30T10:00:00Z"));
        assert!(date_time("2024-02-29T23:59:60Z"));
        assert!(!date_time("2026-01-31T24:00:00Z"));
        assert!(uuid("123e4567-e89b-12d3-a456-426614174000"));
        assert!(uuid("URN:UUID:123E4567-E89B-12D3-A456-426614174000"));
        assert!(!uuid("123e4567e89b12d3a456426614174000"));
        assert!(email("a.b@example.com"));
        assert!(!email("a@-x.com"));
        assert!(uri("https://x/y"));
        assert!(!uri("x y:z"));
        assert!(ipv4("10.0.0.1"));
        assert!(!ipv4("10.0.0.01"));
    }
}
