//! The parse tape: one JSON document read straight from its bytes into a flat, reusable token
//! array (strings borrowed from the input unless they hold escapes), so that validation needs
//! no allocation per value. The reader is deliberately conservative: anything it is not sure
//! [`crate::parse_json`] would accept the same way is reported as [`Unsure`], and the caller
//! takes the strict parser's word for it.

use agentwire_jsonscan as scan;

use crate::fast::instance::{Instance, Key, Kind, key_print, print_of_word};
use crate::json::MAX_JSON_DEPTH;

/// Objects with at most this many members are checked for duplicate keys pairwise.
const PAIRWISE_DUP_MAX: usize = 12;

/// Integers with at most this many digits are read exactly without the float parser.
const FAST_INT_DIGITS: usize = 15;

/// The reader stopped: the input is malformed or outside what it reads by itself.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Unsure;

#[derive(Debug, Clone, Copy)]
pub(crate) enum Tok {
    Null,
    Bool(bool),
    Num(f64),
    /// A string: `start..start+len` in the input, or in the tape's arena when `escaped`.
    Str {
        start: u32,
        len: u32,
        escaped: bool,
    },
    /// A container whose tokens end (exclusive) at `end`; `len` members or elements.
    Arr {
        end: u32,
        len: u32,
    },
    Obj {
        end: u32,
        len: u32,
    },
}

/// A reusable buffer holding one parsed document.
#[derive(Debug, Default)]
pub struct Tape {
    pub(crate) toks: Vec<Tok>,
    pub(crate) arena: String,
    /// The open objects' keys: token index and [`fingerprint`].
    keys: Vec<(u32, u64)>,
}

impl Tape {
    /// An empty tape.
    pub fn new() -> Tape {
        Tape::default()
    }

    /// Reads `text` into the tape, replacing what it held.
    pub(crate) fn parse(&mut self, text: &str) -> Result<(), Unsure> {
        self.toks.clear();
        self.arena.clear();
        self.keys.clear();
        if text.len() > u32::MAX as usize {
            return Err(Unsure);
        }
        let mut r = Reader {
            b: text.as_bytes(),
            text,
            pos: 0,
            tape: self,
        };
        r.ws();
        r.value(0)?;
        r.ws();
        if r.pos != r.b.len() {
            return Err(Unsure);
        }
        Ok(())
    }

    /// The root value of the last document read, viewed with its input text.
    pub(crate) fn root<'a>(&'a self, text: &'a str) -> TapeRef<'a> {
        TapeRef {
            tape: self,
            text,
            idx: 0,
        }
    }

    /// Where the string token `idx` is: start, length, and whether it is in the arena (it had
    /// escapes) rather than the input.
    #[inline]
    fn string_at(&self, idx: u32) -> Option<(usize, u32, bool)> {
        match self.toks[idx as usize] {
            Tok::Str {
                start,
                len,
                escaped,
            } => Some((start as usize, len, escaped)),
            _ => None,
        }
    }

    /// The [`key_print`] of the string token `idx`, read from the
    /// bytes of `text` (or of the arena, for a string with escapes).
    #[inline]
    fn print_at(&self, text: &str, idx: u32) -> u64 {
        let Some((start, len, escaped)) = self.string_at(idx) else {
            return 0;
        };
        let from = if escaped { &self.arena } else { text };
        fingerprint(from.as_bytes().get(start..).unwrap_or_default(), len)
    }

    fn str_at<'a>(&'a self, text: &'a str, idx: u32) -> &'a str {
        let Some((start, len, escaped)) = self.string_at(idx) else {
            return "";
        };
        let from = if escaped { self.arena.as_str() } else { text };
        &from[start..start + len as usize]
    }
}

struct Reader<'t, 'a> {
    b: &'a [u8],
    text: &'a str,
    pos: usize,
    tape: &'t mut Tape,
}

impl Reader<'_, '_> {
    #[inline]
    fn ws(&mut self) {
        self.pos = scan::skip_ws(self.b, self.pos);
    }

    #[inline]
    fn peek(&self) -> Option<u8> {
        self.b.get(self.pos).copied()
    }

    fn value(&mut self, depth: usize) -> Result<(), Unsure> {
        match self.peek().ok_or(Unsure)? {
            b'{' => self.object(depth + 1),
            b'[' => self.array(depth + 1),
            b'"' => self.string(),
            b't' => self.word(b"true", Tok::Bool(true)),
            b'f' => self.word(b"false", Tok::Bool(false)),
            b'n' => self.word(b"null", Tok::Null),
            b'-' | b'0'..=b'9' => self.number(),
            _ => Err(Unsure),
        }
    }

    fn word(&mut self, w: &[u8], tok: Tok) -> Result<(), Unsure> {
        if self.b.get(self.pos..self.pos + w.len()) == Some(w) {
            self.pos += w.len();
            self.tape.toks.push(tok);
            Ok(())
        } else {
            Err(Unsure)
        }
    }

    fn number(&mut self) -> Result<(), Unsure> {
        let start = self.pos;
        let b = self.b;
        let span = scan::number(b, start).ok_or(Unsure)?;
        let i = span.end;
        let int_start = start + usize::from(b[start] == b'-');
        self.pos = i;
        let v = if span.integer && i - int_start <= FAST_INT_DIGITS {
            let mut n: u64 = 0;
            for d in &b[int_start..i] {
                n = n * 10 + u64::from(d - b'0');
            }
            let f = n as f64;
            if start != int_start { -f } else { f }
        } else {
            let f: f64 = self.text[start..i].parse().map_err(|_| Unsure)?;
            if !f.is_finite() {
                return Err(Unsure);
            }
            f
        };
        self.tape.toks.push(Tok::Num(v));
        Ok(())
    }

    /// Reads a string at `"` onto the tape.
    #[inline]
    fn string(&mut self) -> Result<(), Unsure> {
        let start = self.pos + 1;
        let i = scan::skip_plain(self.b, start);
        let tok = if self.b.get(i) == Some(&b'"') {
            self.pos = i + 1;
            Tok::Str {
                start: start as u32,
                len: (i - start) as u32,
                escaped: false,
            }
        } else {
            self.string_rest(start, i)?
        };
        self.tape.toks.push(tok);
        Ok(())
    }

    /// [`Reader::string`] past its first stop at `i`: an escape, a control character, or the
    /// input's last bytes.
    #[inline(never)]
    fn string_rest(&mut self, start: usize, mut i: usize) -> Result<Tok, Unsure> {
        let b = self.b;
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    return Ok(Tok::Str {
                        start: start as u32,
                        len: (i - start) as u32,
                        escaped: false,
                    });
                }
                Some(b'\\') => break,
                Some(c) if *c < 0x20 => return Err(Unsure),
                Some(_) => i = scan::skip_plain(b, i + 1),
                None => return Err(Unsure),
            }
        }
        // Escapes: decode into the arena.
        let arena_start = self.tape.arena.len();
        self.tape.arena.push_str(&self.text[start..i]);
        loop {
            match b.get(i) {
                Some(b'"') => {
                    self.pos = i + 1;
                    let len = self.tape.arena.len() - arena_start;
                    if self.tape.arena.len() > u32::MAX as usize {
                        return Err(Unsure);
                    }
                    return Ok(Tok::Str {
                        start: arena_start as u32,
                        len: len as u32,
                        escaped: true,
                    });
                }
                Some(b'\\') => {
                    let (c, len) = scan::escape(b, i).ok_or(Unsure)?;
                    self.tape.arena.push(c);
                    i += len;
                }
                Some(c) if *c < 0x20 => return Err(Unsure),
                Some(_) => {
                    let s = i;
                    i = scan::skip_plain(b, i);
                    while b
                        .get(i)
                        .is_some_and(|c| *c != b'"' && *c != b'\\' && *c >= 0x20)
                    {
                        i += 1;
                    }
                    self.tape.arena.push_str(&self.text[s..i]);
                }
                None => return Err(Unsure),
            }
        }
    }

    fn array(&mut self, depth: usize) -> Result<(), Unsure> {
        if depth > MAX_JSON_DEPTH {
            return Err(Unsure);
        }
        self.pos += 1;
        let at = self.tape.toks.len();
        self.tape.toks.push(Tok::Arr { end: 0, len: 0 });
        self.ws();
        let mut len = 0u32;
        if self.peek() == Some(b']') {
            self.pos += 1;
        } else {
            loop {
                self.value(depth)?;
                len += 1;
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(b']') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Unsure),
                }
            }
        }
        let end = u32::try_from(self.tape.toks.len()).map_err(|_| Unsure)?;
        self.tape.toks[at] = Tok::Arr { end, len };
        Ok(())
    }

    fn object(&mut self, depth: usize) -> Result<(), Unsure> {
        if depth > MAX_JSON_DEPTH {
            return Err(Unsure);
        }
        self.pos += 1;
        let at = self.tape.toks.len();
        self.tape.toks.push(Tok::Obj { end: 0, len: 0 });
        let keys_base = self.tape.keys.len();
        self.ws();
        let mut len = 0u32;
        if self.peek() == Some(b'}') {
            self.pos += 1;
        } else {
            loop {
                if self.peek() != Some(b'"') {
                    return Err(Unsure);
                }
                let key_idx = self.tape.toks.len() as u32;
                self.string()?;
                let print = self.tape.print_at(self.text, key_idx);
                self.tape.keys.push((key_idx, print));
                self.ws();
                if self.peek() != Some(b':') {
                    return Err(Unsure);
                }
                self.pos += 1;
                self.ws();
                self.value(depth)?;
                len += 1;
                self.ws();
                match self.peek() {
                    Some(b',') => {
                        self.pos += 1;
                        self.ws();
                    }
                    Some(b'}') => {
                        self.pos += 1;
                        break;
                    }
                    _ => return Err(Unsure),
                }
            }
        }
        self.check_duplicates(keys_base)?;
        self.tape.keys.truncate(keys_base);
        let end = u32::try_from(self.tape.toks.len()).map_err(|_| Unsure)?;
        self.tape.toks[at] = Tok::Obj { end, len };
        Ok(())
    }

    fn check_duplicates(&self, base: usize) -> Result<(), Unsure> {
        let keys = &self.tape.keys[base..];
        let name = |k: u32| self.tape.str_at(self.text, k);
        // Most objects' keys land in distinct bits of a 256-bit set by their prints: then no
        // two are equal, and nothing is compared.
        let mut bits = [0u64; 4];
        let mut clash = false;
        for &(_, print) in keys {
            let bit = (print.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 56) as usize;
            let (word, mask) = (bit / 64, 1u64 << (bit % 64));
            clash |= bits[word] & mask != 0;
            bits[word] |= mask;
        }
        if !clash {
            return Ok(());
        }
        if keys.len() <= PAIRWISE_DUP_MAX {
            for (n, &(a, print)) in keys.iter().enumerate() {
                if keys[..n]
                    .iter()
                    .any(|&(b, other)| other == print && name(b) == name(a))
                {
                    return Err(Unsure);
                }
            }
            return Ok(());
        }
        let mut names: Vec<&str> = keys.iter().map(|&(k, _)| name(k)).collect();
        names.sort_unstable();
        if names.windows(2).any(|w| w[0] == w[1]) {
            return Err(Unsure);
        }
        Ok(())
    }
}

/// A key's [`key_print`], read from `from`, which starts at the
/// key and may run past its `len` bytes.
#[inline]
fn fingerprint(from: &[u8], len: u32) -> u64 {
    let mut word = [0u8; 8];
    match from.get(..8) {
        Some(eight) => word.copy_from_slice(eight),
        None => {
            let n = from.len().min(8);
            word[..n].copy_from_slice(&from[..n]);
        }
    }
    let word = u64::from_le_bytes(word);
    let word = if len < 8 {
        word & ((1u64 << (8 * len)) - 1)
    } else {
        word
    };
    print_of_word(word, len as usize)
}

/// One value on a tape.
#[derive(Clone, Copy)]
pub(crate) struct TapeRef<'a> {
    tape: &'a Tape,
    text: &'a str,
    idx: u32,
}

impl<'a> TapeRef<'a> {
    #[inline]
    fn tok(self) -> Tok {
        self.tape.toks[self.idx as usize]
    }

    /// Index of the token after this value.
    #[inline]
    fn next_index(self) -> u32 {
        match self.tok() {
            Tok::Arr { end, .. } | Tok::Obj { end, .. } => end,
            _ => self.idx + 1,
        }
    }

    fn at(self, idx: u32) -> TapeRef<'a> {
        TapeRef { idx, ..self }
    }

    /// The value at a JSON Pointer below this one.
    pub(crate) fn pointer(self, ptr: &str) -> Option<TapeRef<'a>> {
        if ptr.is_empty() {
            return Some(self);
        }
        if let Some(name) = ptr.strip_prefix('/').filter(|n| !n.contains(['/', '~']))
            && self.kind() == Kind::Object
        {
            return self.get(name);
        }
        let tokens = crate::pointer::tokens(ptr)?;
        let mut cur = self;
        for t in tokens {
            cur = match cur.kind() {
                Kind::Object => cur.get(&t)?,
                Kind::Array => {
                    let n: usize = t.parse().ok()?;
                    cur.items().nth(n)?
                }
                _ => return None,
            };
        }
        Some(cur)
    }
}

pub(crate) struct TapeItems<'a> {
    cur: TapeRef<'a>,
    end: u32,
}

impl<'a> Iterator for TapeItems<'a> {
    type Item = TapeRef<'a>;
    #[inline]
    fn next(&mut self) -> Option<TapeRef<'a>> {
        if self.cur.idx >= self.end {
            return None;
        }
        let item = self.cur;
        self.cur.idx = item.next_index();
        Some(item)
    }
}

pub(crate) struct TapeEntries<'a> {
    cur: TapeRef<'a>,
    end: u32,
}

impl<'a> Iterator for TapeEntries<'a> {
    type Item = (&'a str, TapeRef<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        if self.cur.idx >= self.end {
            return None;
        }
        let key = self.cur.as_str();
        let value = self.cur.at(self.cur.idx + 1);
        self.cur.idx = value.next_index();
        Some((key, value))
    }
}

/// A member name on a tape: its print is read from the input's bytes, its text made on demand.
#[derive(Clone, Copy)]
pub(crate) struct TapeKey<'a>(TapeRef<'a>);

impl<'a> Key<'a> for TapeKey<'a> {
    #[inline]
    fn print(self) -> u64 {
        self.0.tape.print_at(self.0.text, self.0.idx)
    }
    #[inline]
    fn text(self) -> &'a str {
        self.0.as_str()
    }
}

pub(crate) struct TapeKeyedEntries<'a>(TapeEntries<'a>);

impl<'a> Iterator for TapeKeyedEntries<'a> {
    type Item = (TapeKey<'a>, TapeRef<'a>);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        let e = &mut self.0;
        if e.cur.idx >= e.end {
            return None;
        }
        let key = TapeKey(e.cur);
        let value = e.cur.at(e.cur.idx + 1);
        e.cur.idx = value.next_index();
        Some((key, value))
    }
}

impl<'a> Instance<'a> for TapeRef<'a> {
    type Items = TapeItems<'a>;
    type Entries = TapeEntries<'a>;
    type Key = TapeKey<'a>;
    type KeyedEntries = TapeKeyedEntries<'a>;

    #[inline]
    fn kind(self) -> Kind {
        match self.tok() {
            Tok::Null => Kind::Null,
            Tok::Bool(_) => Kind::Bool,
            Tok::Num(_) => Kind::Number,
            Tok::Str { .. } => Kind::String,
            Tok::Arr { .. } => Kind::Array,
            Tok::Obj { .. } => Kind::Object,
        }
    }
    #[inline]
    fn as_bool(self) -> bool {
        matches!(self.tok(), Tok::Bool(true))
    }
    #[inline]
    fn as_f64(self) -> f64 {
        match self.tok() {
            Tok::Num(f) => f,
            _ => f64::NAN,
        }
    }
    #[inline]
    fn as_str(self) -> &'a str {
        self.tape.str_at(self.text, self.idx)
    }
    #[inline]
    fn items(self) -> TapeItems<'a> {
        match self.tok() {
            Tok::Arr { end, .. } => TapeItems {
                cur: self.at(self.idx + 1),
                end,
            },
            _ => TapeItems { cur: self, end: 0 },
        }
    }
    #[inline]
    fn len(self) -> usize {
        match self.tok() {
            Tok::Arr { len, .. } | Tok::Obj { len, .. } => len as usize,
            _ => 0,
        }
    }
    #[inline]
    fn entries(self) -> TapeEntries<'a> {
        match self.tok() {
            Tok::Obj { end, .. } => TapeEntries {
                cur: self.at(self.idx + 1),
                end,
            },
            _ => TapeEntries { cur: self, end: 0 },
        }
    }
    #[inline]
    fn keyed_entries(self) -> TapeKeyedEntries<'a> {
        TapeKeyedEntries(self.entries())
    }
    #[inline]
    fn identity(self) -> Option<usize> {
        Some(self.idx as usize)
    }
    fn get(self, key: &str) -> Option<TapeRef<'a>> {
        let print = key_print(key);
        let short = key.len() < 8;
        self.keyed_entries()
            .find(|(k, _)| k.print() == print && (short || k.text() == key))
            .map(|(_, v)| v)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(s: &str) -> Result<(), Unsure> {
        Tape::new().parse(s)
    }

    /// A key's fingerprint is its print, whatever follows it in the input.
    #[test]
    fn a_fingerprint_is_the_key_print() {
        for key in [
            "",
            "a",
            "ab",
            "abc",
            "日本",
            "abcdefg",
            "abcdefgh",
            "abcdefghij",
        ] {
            let input = format!("{key}\":1,\"zzzzzzzz\"");
            assert_eq!(
                fingerprint(input.as_bytes(), key.len() as u32),
                key_print(key),
                "{key:?}"
            );
            assert_eq!(
                fingerprint(key.as_bytes(), key.len() as u32),
                key_print(key)
            );
        }
    }

    /// Members are found by print, then by text where the print cannot tell: escaped keys
    /// (decoded into the arena), keys of eight bytes or more that share their first bytes.
    #[test]
    fn members_are_found_by_print_and_text() {
        let text = r#"{"a\u0062c":1,"abcdefghij":2,"abcdefghik":3,"x":4,"\u0078y":5}"#;
        let mut tape = Tape::new();
        tape.parse(text).unwrap();
        let root = tape.root(text);
        let num = |key: &str| root.get(key).map(|v| v.as_f64());
        assert_eq!(num("abc"), Some(1.0));
        assert_eq!(num("abcdefghij"), Some(2.0));
        assert_eq!(num("abcdefghik"), Some(3.0));
        assert_eq!(num("abcdefghiX"), None);
        assert_eq!(num("x"), Some(4.0));
        assert_eq!(num("xy"), Some(5.0));
        assert_eq!(num("ab"), None);
        assert_eq!(num(""), None);
        let prints: Vec<u64> = root.keyed_entries().map(|(k, _)| k.print()).collect();
        let texts: Vec<&str> = root.keyed_entries().map(|(k, _)| k.text()).collect();
        assert_eq!(texts, ["abc", "abcdefghij", "abcdefghik", "x", "xy"]);
        let expected: Vec<u64> = texts.iter().map(|t| key_print(t)).collect();
        assert_eq!(prints, expected);
    }

    #[test]
    fn reads_what_the_strict_parser_reads() {
        for ok in [
            r#"{"a":[1,-2.5e3,"x\n\u00e9\ud83d\ude00",true,null,{}]}"#,
            " [] ",
            "0",
            r#""""#,
        ] {
            assert_eq!(read(ok), Ok(()), "{ok}");
            assert!(crate::parse_json(ok.as_bytes()).is_ok());
        }
    }

    #[test]
    fn is_unsure_about_everything_else() {
        for bad in [
            r#"{"a":1,"a":2}"#,
            r#"{"a":1,"\u0061":2}"#,
            "[1,]",
            "01",
            "1.",
            "-",
            r#""\ud800""#,
            "\"a\u{1}\"",
            "1e400",
            "[1] x",
            "",
        ] {
            assert_eq!(read(bad), Err(Unsure), "{bad}");
        }
        let deep = "[".repeat(MAX_JSON_DEPTH + 1) + &"]".repeat(MAX_JSON_DEPTH + 1);
        assert_eq!(read(&deep), Err(Unsure));
        let ok = "[".repeat(MAX_JSON_DEPTH) + &"]".repeat(MAX_JSON_DEPTH);
        assert_eq!(read(&ok), Ok(()));
    }

    #[test]
    fn views_values() {
        let text = r#"{"k":[1,{"x":"y\"z"}],"n":2}"#;
        let mut tape = Tape::new();
        tape.parse(text).unwrap();
        let root = tape.root(text);
        assert_eq!(root.len(), 2);
        let keys: Vec<_> = root.entries().map(|(k, _)| k).collect();
        assert_eq!(keys, ["k", "n"]);
        assert_eq!(root.pointer("/k/1/x").unwrap().as_str(), "y\"z");
        assert_eq!(root.get("n").unwrap().as_f64(), 2.0);
    }
}
