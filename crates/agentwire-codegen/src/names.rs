//! Identifier spelling shared by every generator: splitting wire names into words, the case
//! styles, and collision-free claiming of names.

use std::collections::BTreeSet;

/// Splits a wire name into words: on every character that is not ASCII alphanumeric, and at
/// lower-to-upper and letter-to-digit boundaries (`acceptOnce` → `accept`, `Once`;
/// `HTTPServer` → `HTTP`, `Server`).
pub fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for chunk in text.split(|c: char| !c.is_ascii_alphanumeric()) {
        if chunk.is_empty() {
            continue;
        }
        let chars: Vec<char> = chunk.chars().collect();
        let mut current = String::new();
        for (i, &c) in chars.iter().enumerate() {
            if i > 0 {
                let prev = chars[i - 1];
                let next = chars.get(i + 1).copied();
                let boundary = (prev.is_ascii_lowercase() && c.is_ascii_uppercase())
                    || (prev.is_ascii_digit() && c.is_ascii_alphabetic())
                    || (prev.is_ascii_alphabetic() && c.is_ascii_digit())
                    || (prev.is_ascii_uppercase()
                        && c.is_ascii_uppercase()
                        && next.is_some_and(|n| n.is_ascii_lowercase()));
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
        Some(first) => {
            first.to_ascii_uppercase().to_string() + &chars.as_str().to_ascii_lowercase()
        }
        None => String::new(),
    }
}

/// `PascalCase`; an empty or digit-led result gets a `T` / `V` prefix so it stays an identifier.
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
            out.push_str(&w.to_ascii_lowercase());
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
        .map(|w| w.to_ascii_lowercase())
        .collect::<Vec<_>>()
        .join("_");
    fix_start(joined, "v")
}

/// `SCREAMING_SNAKE_CASE`.
pub fn screaming(text: &str) -> String {
    let joined = words(text)
        .iter()
        .map(|w| w.to_ascii_uppercase())
        .collect::<Vec<_>>()
        .join("_");
    fix_start(joined, "V")
}

fn fix_start(name: String, prefix: &str) -> String {
    match name.chars().next() {
        None => format!("{prefix}Empty"),
        Some(c) if c.is_ascii_digit() => format!("{prefix}{name}"),
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
    fn claims_are_collision_free() {
        let mut scope = NameScope::with_reserved(&["type"]);
        assert_eq!(scope.claim("type"), "type2");
        assert_eq!(scope.claim("a"), "a");
        assert_eq!(scope.claim("a"), "a2");
        assert_eq!(scope.claim("a"), "a3");
    }
}
