//! Lint on the real protocol schemas (OpenClaw's `protocol.schema.json`, the ChainlessChain
//! canonical schema): the number of findings per code is held by a snapshot, so that a change to
//! a rule (or to the artifacts) shows in review.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use agentwire_schema::lint::{DefinitionRoots, lint_document};
use agentwire_schema::{Finding, LintSummary, SchemaDocument, lint};
use agentwire_testkit::{chainlesschain_schema_path, openclaw_schema_path};

/// Counts per code, then every finding that is not one of the many open-object warnings.
fn report(findings: &[Finding]) -> String {
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for finding in findings {
        *counts.entry(finding.code.code()).or_default() += 1;
    }
    let summary = LintSummary::of(findings);
    let mut out = format!(
        "errors {}, warnings {}, infos {}\n",
        summary.errors, summary.warnings, summary.infos
    );
    for (code, n) in counts {
        writeln!(out, "{code}: {n}").unwrap();
    }
    out.push_str("--\n");
    for finding in findings.iter().filter(|f| f.code.code() != "AW040") {
        writeln!(out, "{finding}").unwrap();
    }
    out
}

#[test]
fn openclaw_protocol_schema() {
    let doc = SchemaDocument::open(openclaw_schema_path()).unwrap();
    let findings = lint(&doc);
    insta::assert_snapshot!(report(&findings));
    // Its root reaches only the three frames: every other definition is addressed by name.
    let rooted = lint_document(&doc, DefinitionRoots::Rooted);
    let unreachable = rooted.iter().filter(|f| f.code.code() == "AW050").count();
    assert_eq!(unreachable, 874);
    let open: Vec<&str> = findings
        .iter()
        .filter(|f| f.code.code() == "AW040")
        .map(|f| f.pointer.as_str())
        .collect();
    assert_eq!(
        open,
        [
            "/definitions/SessionRow/properties/worktree",
            "/definitions/SessionRow/properties/forkSource"
        ]
    );
}

#[test]
fn chainlesschain_canonical_schema() {
    let doc = SchemaDocument::open(chainlesschain_schema_path()).unwrap();
    let findings = lint(&doc);
    insta::assert_snapshot!(report(&findings));
    // The context/memory method table in x-cc-protocol names its request and response
    // definitions: they count as referenced.
    let rooted = lint_document(&doc, DefinitionRoots::Rooted);
    let unreachable: Vec<&str> = rooted
        .iter()
        .filter(|f| f.code.code() == "AW050")
        .map(|f| f.pointer.as_str())
        .collect();
    assert_eq!(unreachable.len(), 91);
    assert!(!unreachable.contains(&"/$defs/MemoryRecallRequest"));
    assert!(unreachable.contains(&"/$defs/ApprovalDecision"));
}
