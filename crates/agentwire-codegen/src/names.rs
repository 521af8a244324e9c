//! Identifier spelling shared by every generator: splitting wire names into words, the case
//! styles, and collision-free claiming of names.

use std::collections::BTreeSet;

/// Whether `c` may appear inside a generated identifier: a Unicode identifier character
/// (`XID_Continue`) other than `_`, which separates words. Every target language (Rust,
/// TypeScript, Python 3, Kotlin, Swift) accepts these, so letters such as `İ`, `é` or `日` are
/// kept rather than dropped or transliterated.
fn is_word_char(c: char) -> bool {
    c != '_' && unicode_ident::is_xid_continue(c)
}

/// Splits a wire name into words: on every character that cannot be part of an identifier
/// (see [`is_word_char`]), and at lower-to-upper and letter-to-digit boundaries
/// (`acceptOnce` → `accept`, `Once`; `HTTPServer` → `HTTP`, `Server`; `İstanbul` stays whole).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split(|c: char| !is_word_char(c)) {
        if chunk.is_empty() {
            continue;
        }
        let chars: Vec<char> = chunk.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            if i > 0 {
                let prev = chars[i - 1];
                let next = chars.get(i + 1).copied();
                let boundary = (prev.is_lowercase() && c.is_uppercase())
                    || (prev.is_numeric() && c.is_alphabetic())
                    || (prev.is_alphabetic() && c.is_numeric())
                    || (prev.is_uppercase()
                        && c.is_uppercase()
                        && next.is_some_and(char::is_lowercase));
                if boundary && !current.is_empty() {
                    out.push(std::mem::take(&mut current));
                }
            }
            current.push(c);
        }
        if !current.is_empty() {
            out.push(current);
        }
    }
    out
}

fn capitalize(word: &str) -> String {
    let mut chars = word.chars();
    match chars.next() {
        Some(first) => first.to_uppercase().collect::<String>() + &chars.as_str().to_lowercase(),
        None => String::new(),
    }
}

/// `PascalCase`; an empty result, or one that does not start with an identifier-start
/// character (a digit, a combining mark), gets a `T` prefix so it stays an identifier.
pub fn pascal(text: &str) -> String {
    let joined: String = words(text).iter().map(|w| capitalize(w)).collect();
    fix_start(joined, "T")
}

/// `camelCase`.
pub fn camel(text: &str) -> String {
    let parts = words(text);
    let mut out = String::new();
    for (i, w) in parts.iter().enumerate() {
        if i == 0 {
            out.push_str(&w.to_lowercase());
        } else {
            out.push_str(&capitalize(w));
        }
    }
    fix_start(out, "v")
}

/// `snake_case`.
pub fn snake(text: &str) -> String {
    let joined = words(text)
        .iter()
        .map(|w| w.to_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    fix_start(joined, "v")
}

/// `SCREAMING_SNAKE_CASE`.
pub fn screaming(text: &str) -> String {
    let joined = words(text)
        .iter()
        .map(|w| w.to_uppercase())
        .collect::<Vec<_>>()
        .join("_");
    fix_start(joined, "V")
}

fn fix_start(name: String, prefix: &str) -> String {
    match name.chars().next() {
        None => format!("{prefix}Empty"),
        Some(c) if !unicode_ident::is_xid_start(c) => format!("{prefix}{name}"),
        Some(_) => name,
    }
}

/// Whether `text` is a plain ASCII identifier (`[A-Za-z_][A-Za-z0-9_]*`).
pub fn is_plain_identifier(text: &str) -> bool {
    let mut chars = text.chars();
    matches!(chars.next(), Some(c) if c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Hands out names inside one scope: the first claim of a spelling gets it, later claims get
/// `2`, `3`, … appended, so the outcome depends only on the order of claims.
#[derive(Debug, Default, Clone)]
pub struct NameScope {
    taken: BTreeSet<String>,
}

impl NameScope {
    /// An empty scope.
    pub fn new() -> Self {
        NameScope::default()
    }

    /// A scope where `reserved` (e.g. keywords or helper names) are already taken.
    pub fn with_reserved(reserved: &[&str]) -> Self {
        NameScope {
            taken: reserved.iter().map(|s| (*s).to_owned()).collect(),
        }
    }

    /// Claims `wanted`, or the first free `wanted2`, `wanted3`, ….
    pub fn claim(&mut self, wanted: &str) -> String {
        if self.taken.insert(wanted.to_owned()) {
            return wanted.to_owned();
        }
        let mut n = 2u64;
        loop {
            let candidate = format!("{wanted}{n}");
            if self.taken.insert(candidate.clone()) {
                return candidate;
            }
            n += 1;
        }
    }

    /// Whether a spelling is taken.
    pub fn contains(&self, name: &str) -> bool {
        self.taken.contains(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words() {
        assert_eq!(words("acceptOnce"), ["accept", "Once"]);
        assert_eq!(
            words("context.plan.created"),
            ["context", "plan", "created"]
        );
        assert_eq!(words("HTTPServer2x"), ["HTTP", "Server", "2", "x"]);
        assert_eq!(words("trusted-system"), ["trusted", "system"]);
    }

    #[test]
    fn case_styles() {
        assert_eq!(pascal("compaction-degraded"), "CompactionDegraded");
        assert_eq!(camel("schema_version"), "schemaVersion");
        assert_eq!(snake("stateVersion"), "state_version");
        assert_eq!(screaming("context.plan.created"), "CONTEXT_PLAN_CREATED");
        assert_eq!(pascal("2fa"), "T2Fa");
        assert_eq!(camel(""), "vEmpty");
    }

    #[test]
    fn unicode_letters_are_kept() {
        assert_eq!(pascal("İstanbul"), "İstanbul");
        assert_eq!(pascal("café-au-lait"), "CaféAuLait");
        assert_eq!(snake("größeWert"), "größe_wert");
        assert_eq!(screaming("straße"), "STRASSE");
        assert_eq!(pascal("日本語"), "日本語");
        assert_eq!(words("x-🙂-y"), ["x", "y"]);
        // A combining mark cannot start an identifier.
        assert_eq!(pascal("\u{301}a"), "T\u{301}a");
    }

    #[test]
    fn claims_are_collision_free() {
        let mut scope = NameScope::with_reserved(&["type"]);
        assert_eq!(scope.claim("type"), "type2");
        assert_eq!(scope.claim("a"), "a");
        assert_eq!(scope.claim("a"), "a2");
        assert_eq!(scope.claim("a"), "a3");
    }
}
