//! The read-only view of a JSON value the plan is evaluated over ([`Instance`]), with its
//! member names ([`Key`]) and their prints: what parsed values and the parse tape both offer,
//! so one evaluator and one name lookup serve both.

use serde_json::Value;

/// A name's first bytes and length in one word: names under eight bytes are equal exactly when
/// their prints are (see [`print_of_word`]); longer ones share a print when their first seven
/// bytes and length (up to 255) do.
#[inline]
pub(crate) fn key_print(key: &str) -> u64 {
    let bytes = key.as_bytes();
    let n = bytes.len();
    // The first min(n, 8) bytes, little-endian, read with at most two loads: four-byte loads
    // from both ends overlap for 4..8 bytes, three byte loads cover 1..3.
    let word = if let Some(eight) = bytes.first_chunk::<8>() {
        u64::from_le_bytes(*eight)
    } else if let (Some(lo), Some(hi)) = (bytes.first_chunk::<4>(), bytes.last_chunk::<4>()) {
        u64::from(u32::from_le_bytes(*lo)) | u64::from(u32::from_le_bytes(*hi)) << (8 * (n - 4))
    } else if let (Some(&first), Some(&last)) = (bytes.first(), bytes.last()) {
        u64::from(first)
            | u64::from(bytes[n / 2]) << (8 * (n / 2))
            | u64::from(last) << (8 * (n - 1))
    } else {
        0
    };
    print_of_word(word, n)
}

/// The print of a name of `len` bytes whose first min(len, 8) bytes are `word` (little-endian,
/// zero above): its first seven bytes, then its length in the low byte (255 for 255 or more). A
/// name under eight bytes fits whole, and its low byte (below 8) is one no longer name has.
#[inline]
pub(crate) fn print_of_word(word: u64, len: usize) -> u64 {
    word << 8 | len.min(255) as u64
}

/// The kinds of JSON value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Null,
    Bool,
    Number,
    String,
    Array,
    Object,
}

/// A member name of an object instance: its [`key_print`], and its text, which a view may make
/// only when asked (a tape reads the print straight from the input's bytes).
pub(crate) trait Key<'a>: Copy {
    fn print(self) -> u64;
    fn text(self) -> &'a str;
}

impl<'a> Key<'a> for &'a str {
    #[inline]
    fn print(self) -> u64 {
        key_print(self)
    }
    #[inline]
    fn text(self) -> &'a str {
        self
    }
}

/// A read-only view of one JSON value.
pub(crate) trait Instance<'a>: Copy {
    type Items: Iterator<Item = Self>;
    type Entries: Iterator<Item = (&'a str, Self)>;
    type Key: Key<'a>;
    type KeyedEntries: Iterator<Item = (Self::Key, Self)>;
    fn kind(self) -> Kind;
    fn as_bool(self) -> bool;
    fn as_f64(self) -> f64;
    fn as_str(self) -> &'a str;
    /// Elements of an array (empty for other kinds).
    fn items(self) -> Self::Items;
    fn len(self) -> usize;
    /// Members of an object in document order (empty for other kinds).
    fn entries(self) -> Self::Entries;
    /// [`Instance::entries`] with keys as [`Key`]s.
    fn keyed_entries(self) -> Self::KeyedEntries;
    fn get(self, key: &str) -> Option<Self>;
    /// What tells this value apart from every other value of the same instance (its place in
    /// it), for memoising the verdict of a subschema on it; `None` when it is not worth it.
    fn identity(self) -> Option<usize>;
}

impl<'a> Instance<'a> for &'a Value {
    type Items = std::slice::Iter<'a, Value>;
    type Entries = ValueEntries<'a>;
    type Key = &'a str;
    type KeyedEntries = ValueEntries<'a>;

    #[inline]
    fn kind(self) -> Kind {
        match self {
            Value::Null => Kind::Null,
            Value::Bool(_) => Kind::Bool,
            Value::Number(_) => Kind::Number,
            Value::String(_) => Kind::String,
            Value::Array(_) => Kind::Array,
            Value::Object(_) => Kind::Object,
        }
    }
    #[inline]
    fn as_bool(self) -> bool {
        matches!(self, Value::Bool(true))
    }
    #[inline]
    fn as_f64(self) -> f64 {
        self.as_f64().unwrap_or(f64::NAN)
    }
    #[inline]
    fn as_str(self) -> &'a str {
        self.as_str().unwrap_or("")
    }
    #[inline]
    fn items(self) -> Self::Items {
        match self {
            Value::Array(a) => a.iter(),
            _ => [].iter(),
        }
    }
    #[inline]
    fn len(self) -> usize {
        match self {
            Value::Array(a) => a.len(),
            Value::Object(o) => o.len(),
            _ => 0,
        }
    }
    #[inline]
    fn entries(self) -> Self::Entries {
        ValueEntries(match self {
            Value::Object(o) => Some(o.iter()),
            _ => None,
        })
    }
    #[inline]
    fn keyed_entries(self) -> Self::KeyedEntries {
        self.entries()
    }
    #[inline]
    fn get(self, key: &str) -> Option<Self> {
        match self {
            Value::Object(o) => o.get(key),
            _ => None,
        }
    }
    #[inline]
    fn identity(self) -> Option<usize> {
        // The value's address: distinct for every value of the tree borrowed for the run.
        Some(std::ptr::from_ref(self) as usize)
    }
}

pub(crate) struct ValueEntries<'a>(Option<serde_json::map::Iter<'a>>);

impl<'a> Iterator for ValueEntries<'a> {
    type Item = (&'a str, &'a Value);
    #[inline]
    fn next(&mut self) -> Option<Self::Item> {
        self.0.as_mut()?.next().map(|(k, v)| (k.as_str(), v))
    }
}

#[cfg(test)]
mod tests {
    use ahash::AHashMap;

    use super::*;

    /// Names under eight bytes are equal exactly when their prints are, and share none with a
    /// longer name (what `ObjPlan::index_of` relies on).
    #[test]
    fn key_prints_tell_short_names_apart_exactly() {
        let alphabet = [
            "a", "b", "\"", "é", "日", "\u{0}", "\u{f}", "\u{8}", "\u{ff}",
        ];
        let mut names = vec![String::new()];
        for _ in 0..4 {
            let longer: Vec<String> = names
                .iter()
                .flat_map(|n| alphabet.iter().map(move |c| format!("{n}{c}")))
                .collect();
            names.extend(longer);
            names.sort();
            names.dedup();
        }
        let naive = |k: &str| {
            let mut word = [0u8; 8];
            let n = k.len().min(8);
            word[..n].copy_from_slice(&k.as_bytes()[..n]);
            u64::from_le_bytes(word) << 8 | k.len().min(255) as u64
        };
        let mut short = AHashMap::new();
        for name in &names {
            let print = key_print(name);
            assert_eq!(print, naive(name), "{name:?}");
            if name.len() < 8
                && let Some(other) = short.insert(print, name.clone())
            {
                panic!("{name:?} and {other:?} share a print");
            }
        }
        for name in names.iter().filter(|n| n.len() >= 8) {
            assert!(!short.contains_key(&key_print(name)), "{name:?}");
        }
        assert!(names.len() > 1000);
    }
}
