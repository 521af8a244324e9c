//! JSON Pointer (RFC 6901) helpers: escaping tokens, building pointers and resolving them.

use serde_json::Value;

/// Escapes one reference token: `~` becomes `~0` and `/` becomes `~1`.
pub fn escape_token(token: &str) -> String {
    if !token.contains(['~', '/']) {
        return token.to_owned();
    }
    token.replace('~', "~0").replace('/', "~1")
}

/// Unescapes one reference token (`~1` → `/`, then `~0` → `~`).
/// Returns `None` for a `~` not followed by `0` or `1`.
pub fn unescape_token(token: &str) -> Option<String> {
    if !token.contains('~') {
        return Some(token.to_owned());
    }
    let mut out = String::with_capacity(token.len());
    let mut chars = token.chars();
    while let Some(c) = chars.next() {
        if c == '~' {
            match chars.next() {
                Some('0') => out.push('~'),
                Some('1') => out.push('/'),
                _ => return None,
            }
        } else {
            out.push(c);
        }
    }
    Some(out)
}

/// Appends one unescaped token to a pointer.
pub fn push(pointer: &str, token: &str) -> String {
    let mut out = String::with_capacity(pointer.len() + token.len() + 1);
    out.push_str(pointer);
    out.push('/');
    out.push_str(&escape_token(token));
    out
}

/// Builds a pointer from unescaped tokens.
pub fn from_tokens<'a>(tokens: impl IntoIterator<Item = &'a str>) -> String {
    let mut out = String::new();
    for token in tokens {
        out.push('/');
        out.push_str(&escape_token(token));
    }
    out
}

/// Splits a pointer into unescaped tokens. `""` is the whole document.
/// Returns `None` when the pointer is not well formed.
pub fn tokens(pointer: &str) -> Option<Vec<String>> {
    if pointer.is_empty() {
        return Some(Vec::new());
    }
    let rest = pointer.strip_prefix('/')?;
    rest.split('/').map(unescape_token).collect()
}

/// Resolves a pointer against a value (array indices must be canonical decimal numbers).
pub fn resolve<'v>(root: &'v Value, pointer: &str) -> Option<&'v Value> {
    let mut current = root;
    for token in tokens(pointer)? {
        current = match current {
            Value::Object(map) => map.get(&token)?,
            Value::Array(items) => {
                if token.len() > 1 && token.starts_with('0') {
                    return None;
                }
                items.get(token.parse::<usize>().ok()?)?
            }
            _ => return None,
        };
    }
    Some(current)
}

/// Percent-decodes the fragment of a URI reference (`#/$defs/a%25b` → `/$defs/a%b`).
pub fn percent_decode(fragment: &str) -> Option<String> {
    if !fragment.contains('%') {
        return Some(fragment.to_owned());
    }
    let bytes = fragment.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hex = fragment.get(i + 1..i + 3)?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    String::from_utf8(out).ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn escapes_round_trip() {
        for token in ["a/b", "m~n", "~1", "plain", "", "a~/b"] {
            assert_eq!(unescape_token(&escape_token(token)).as_deref(), Some(token));
        }
        assert_eq!(escape_token("a/b~c"), "a~1b~0c");
        assert_eq!(unescape_token("~01"), Some("~1".to_owned()));
        assert_eq!(unescape_token("~2"), None);
    }

    #[test]
    fn resolves_rfc6901_examples() {
        let doc = json!({"foo": ["bar", "baz"], "": 0, "a/b": 1, "m~n": 8});
        assert_eq!(resolve(&doc, ""), Some(&doc));
        assert_eq!(resolve(&doc, "/foo/0"), Some(&json!("bar")));
        assert_eq!(resolve(&doc, "/"), Some(&json!(0)));
        assert_eq!(resolve(&doc, "/a~1b"), Some(&json!(1)));
        assert_eq!(resolve(&doc, "/m~0n"), Some(&json!(8)));
        assert_eq!(resolve(&doc, "/foo/01"), None);
        assert_eq!(resolve(&doc, "foo"), None);
    }

    #[test]
    fn percent_decoding() {
        assert_eq!(percent_decode("/a%25b").as_deref(), Some("/a%b"));
        assert_eq!(percent_decode("/a%2"), None);
    }
}
