//! Format checks the peers rely on that the engine leaves out for some draft: `uuid` is a
//! 2019-09 format, yet OpenClaw's draft-07 schema uses it and AJV (with ajv-formats) checks it.

/// `uuid` as both AJV and Python `jsonschema` accept it: 8-4-4-4-12 hexadecimal digits, either
/// case, without the `urn:uuid:` prefix (AJV alone allows it).
pub(super) fn is_uuid(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() == 36
        && bytes.iter().enumerate().all(|(i, b)| match i {
            8 | 13 | 18 | 23 => *b == b'-',
            _ => b.is_ascii_hexdigit(),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn uuids() {
        assert!(is_uuid("0f8fad5b-d9cb-469f-a165-70867728950e"));
        assert!(is_uuid("0F8FAD5B-D9CB-469F-A165-70867728950E"));
        assert!(!is_uuid("0f8fad5b-d9cb-469f-a165-70867728950"));
        assert!(!is_uuid("0f8fad5bxd9cb-469f-a165-70867728950e"));
        assert!(!is_uuid("urn:uuid:0f8fad5b-d9cb-469f-a165-70867728950e"));
        assert!(!is_uuid("0f8fad5b-d9cb-469f-a165-70867728950é"));
    }
}
