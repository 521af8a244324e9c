//! The checker on the peers' real schemas: ChainlessChain's frozen v1 baseline against the schema
//! of SDK 0.2.9 (their own checker finds no breaking change), and OpenClaw's 877 definitions.

use std::time::Instant;

use agentwire_schema::SchemaDocument;
use agentwire_schema::compat::{self, ChangeClass, Rule};
use agentwire_testkit::{chainlesschain_schema_path, openclaw_schema_path, peer_fixture};
use serde_json::{Value, json};

fn load(path: &std::path::Path) -> SchemaDocument {
    SchemaDocument::open(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

#[test]
fn chainlesschain_baseline_to_sdk_029_has_no_breaking_change() {
    let baseline = load(&peer_fixture(
        "chainlesschain/fixtures/schema/baselines/v1.json",
    ));
    let current = load(&chainlesschain_schema_path());
    let report = compat::compat(&baseline, &current);
    let breaking: Vec<String> = report
        .breaking()
        .map(|c| format!("{} at {}", c.rule.id(), c.pointer))
        .collect();
    assert!(breaking.is_empty(), "{breaking:#?}");
    let count = |rule: Rule| report.changes.iter().filter(|c| c.rule == rule).count();
    assert_eq!(count(Rule::DefinitionAdded), 90);
    assert_eq!(count(Rule::PropertyAdded), 12);
    assert_eq!(count(Rule::EnumValueAdded), 19);
    assert_eq!(count(Rule::VariantAdded), 7);
    assert_eq!(report.changes.len(), 128);
}

#[test]
fn chainlesschain_sdk_029_back_to_the_baseline_is_breaking() {
    let baseline = load(&peer_fixture(
        "chainlesschain/fixtures/schema/baselines/v1.json",
    ));
    let current = load(&chainlesschain_schema_path());
    let report = compat::compat(&current, &baseline);
    assert!(!report.is_compatible());
    assert_eq!(
        report
            .breaking()
            .filter(|c| c.rule == Rule::DefinitionRemoved)
            .count(),
        90
    );
}

#[test]
fn openclaw_compares_quickly_and_finds_each_edit() {
    let path = openclaw_schema_path();
    let old = load(&path);
    let mut edited: Value = old.value().clone();
    let defs = edited["definitions"].as_object_mut().expect("definitions");
    let referenced: Vec<&str> = old.refs().iter().map(|r| r.target.as_str()).collect();
    let first = defs
        .keys()
        .find(|name| !referenced.contains(&format!("/definitions/{name}").as_str()))
        .cloned()
        .expect("an unreferenced definition");
    defs.shift_remove(&first);
    defs.insert("AddedByTest".to_owned(), json!({"type": "string"}));
    let new = SchemaDocument::from_value(edited).expect("edited loads");
    let start = Instant::now();
    let report = compat::compat(&old, &new);
    let elapsed = start.elapsed();
    eprintln!("compat on OpenClaw (877 definitions, one removed, one added): {elapsed:?}");
    let rules: Vec<(Rule, ChangeClass)> = report
        .changes
        .iter()
        .filter(|c| matches!(c.rule, Rule::DefinitionRemoved | Rule::DefinitionAdded))
        .map(|c| (c.rule, c.class))
        .collect();
    assert_eq!(
        rules,
        [
            (Rule::DefinitionRemoved, ChangeClass::Breaking),
            (Rule::DefinitionAdded, ChangeClass::Additive)
        ]
    );
}
