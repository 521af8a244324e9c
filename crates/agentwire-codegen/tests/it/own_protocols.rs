//! The bindings of the project's own protocol schemas are checked in under
//! `protocols/<name>/generated/`; this test regenerates them and fails with the command that
//! brings them up to date.

// Helpers outside #[test] functions panic on failure too: that is how a test fails.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::Path;

use agentwire_codegen::{Language, Options, Staleness};
use agentwire_schema::SchemaDocument;

/// Every own protocol schema with generated bindings: (folder under `protocols/`, schema file).
const OWN_SCHEMAS: &[(&str, &str)] = &[
    ("tasklens", "run-events.schema.json"),
    ("roll-runtime", "roll-runtime.schema.json"),
    ("agent", "agent.schema.json"),
    ("chainlesschain-app-server", "app-server.schema.json"),
    ("openclaw-gateway", "gateway.schema.json"),
];

#[test]
fn generated_bindings_are_up_to_date() {
    let root = agentwire_testkit::repo_root();
    let mut problems = Vec::new();
    for (folder, schema) in OWN_SCHEMAS {
        let schema_rel = format!("protocols/{folder}/{schema}");
        let out_rel = format!("protocols/{folder}/generated");
        let doc = SchemaDocument::open(root.join(&schema_rel)).unwrap();
        let files = agentwire_codegen::generate_from_document(
            &doc,
            schema,
            &Language::ALL,
            &Options::for_schema(schema),
        )
        .unwrap();
        let stale = agentwire_codegen::check(&root.join(&out_rel), &files);
        if !stale.is_empty() {
            let list: Vec<String> = stale
                .iter()
                .map(|(path, why)| {
                    let why = if *why == Staleness::Missing {
                        "missing"
                    } else {
                        "stale"
                    };
                    format!("{why}: {}", Path::new(&out_rel).join(path).display())
                })
                .collect();
            problems.push(format!(
                "{}\nrun: cargo run -p agentwire-cli -- gen --lang rust,ts,py,kt,swift --out {out_rel} {schema_rel}",
                list.join("\n")
            ));
        }
    }
    assert!(
        problems.is_empty(),
        "generated bindings are out of date:\n{}",
        problems.join("\n")
    );
}

fn generated_files(lang: Language, extension: &str) -> Vec<std::path::PathBuf> {
    let root = agentwire_testkit::repo_root();
    OWN_SCHEMAS
        .iter()
        .flat_map(|(folder, _)| {
            agentwire_testkit::files_with_extension(
                root.join("protocols")
                    .join(folder)
                    .join("generated")
                    .join(lang.code()),
                extension,
            )
        })
        .collect()
}

fn run(command: &mut std::process::Command, what: &str) {
    let output = command
        .output()
        .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
    assert!(
        output.status.success(),
        "{what} failed:\n{}\n{}",
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
}

#[test]
fn checked_in_typescript_compiles_strictly() {
    let files = generated_files(Language::TypeScript, "ts");
    assert_eq!(files.len(), OWN_SCHEMAS.len());
    run(
        agentwire_testkit::require_tsc()
            .args(["--strict", "--noEmit", "--target", "es2020"])
            .args(&files),
        "tsc --strict",
    );
}

#[test]
fn checked_in_python_passes_mypy_strict() {
    let files = generated_files(Language::Python, "py");
    assert_eq!(files.len(), OWN_SCHEMAS.len());
    for file in files {
        run(
            agentwire_testkit::require_mypy().arg("--strict").arg(&file),
            "mypy --strict",
        );
    }
}
