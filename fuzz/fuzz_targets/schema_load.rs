//! The schema loader and the compilers on arbitrary bytes: a document loads or is refused with
//! a typed error; one that loads is linted, compiled into a fast plan and a validator, and
//! validates a few values, all without a panic, a hang or a stack overflow.

#![no_main]

use agentwire_schema::fast::FastSchema;
use agentwire_schema::{SchemaDocument, ValidatorCompiler, lint};
use libfuzzer_sys::fuzz_target;
use serde_json::json;

fuzz_target!(|data: &[u8]| {
    let doc = match SchemaDocument::from_slice(data) {
        Ok(doc) => doc,
        Err(err) => {
            assert!(!err.code().is_empty());
            return;
        }
    };
    let _ = lint(&doc);
    let _ = FastSchema::compile(&doc);
    let Ok(compiler) = ValidatorCompiler::new(&doc) else {
        return;
    };
    let Ok(validator) = compiler.root() else {
        return;
    };
    for instance in [
        json!(null),
        json!(0),
        json!(0.3),
        json!("aaaaaaaaaaaaaaaaaaaaaaaa!"),
        json!([1, 1, {"a": []}]),
        json!({"a": 1, "b": {"c": "d"}}),
    ] {
        let issues = validator.validate(&instance);
        assert_eq!(validator.is_valid(&instance), issues.is_empty(), "{instance}");
    }
});
