//! `Validator::validate_bytes_in` (the verdict on the compiled plan over a reused tape, the
//! report only for invalid messages) answers exactly what `validate_bytes` answers, on a
//! definition of OpenClaw's published schema, for valid, mutated and malformed messages read one
//! after another into the same tape.

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::Tape;
use agentwire_schema::fast::sample::{Generator, Rng, Size, mutate};

#[test]
fn the_tape_path_reports_what_the_value_path_reports() {
    let doc = SchemaDocument::open(agentwire_testkit::openclaw_schema_path()).unwrap();
    let validator = doc.validator_for("ChatSendParams").unwrap();
    let generator = Generator::new(&doc, Size::Small);
    let mut rng = Rng::new(13);
    let params = doc.definition_pointer("ChatSendParams").unwrap();
    let mut messages: Vec<Vec<u8>> = Vec::new();
    for i in 0..600 {
        let message = generator.instance(&params, &mut rng);
        let message = if i % 3 != 0 {
            mutate(&message, &mut rng)
        } else {
            message
        };
        messages.push(serde_json::to_vec(&message).unwrap());
    }
    for bad in [
        &b"{\"sessionKey\":\"s\""[..],
        b"{\"sessionKey\":\"s\",\"sessionKey\":\"s\"}",
        b"\xff{}",
        b"\"\\ud800\"",
        b"1e999",
        b"[]",
    ] {
        messages.push(bad.to_vec());
    }
    messages.push(format!("{}1{}", "[".repeat(200), "]".repeat(200)).into_bytes());
    let mut tape = Tape::new();
    let (mut valid, mut invalid) = (0, 0);
    for bytes in &messages {
        let fast = validator.validate_bytes_in(bytes, &mut tape);
        assert_eq!(
            fast,
            validator.validate_bytes(bytes),
            "{}",
            String::from_utf8_lossy(bytes)
        );
        if fast.is_empty() {
            valid += 1;
        } else {
            invalid += 1;
        }
    }
    // Both verdicts are well represented.
    assert!(
        valid > 200 && invalid > 200,
        "{valid} valid, {invalid} invalid"
    );
}
