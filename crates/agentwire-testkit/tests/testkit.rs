//! Checks that every tool, artifact and cross-validator runner of the test kit works, on tiny
//! schemas with one valid and several invalid instances each.

use agentwire_testkit::{
    CHAINLESSCHAIN_DEFINITION_COUNT, CHAINLESSCHAIN_SCHEMA_DIGEST, LoopbackNamespace,
    OPENCLAW_SCHEMA_SHA256, Verdict, ajv_verdicts, cc_sdk_verdicts,
    chainlesschain_published_digest, chainlesschain_schema_path, chromium_headless,
    files_with_extension, openclaw_schema_path, peer_fixture, py_jsonschema_verdicts, read_json,
    repo_root, require_chromium, require_kotlinc, require_mypy, require_node, require_node_module,
    require_openclaw, require_python, require_tsc, run_ok, sha256_hex, shared_dir, write_temp_json,
};
use serde_json::{Value, json};

fn tiny_schema(draft: &str, defs_keyword: &str) -> Value {
    json!({
        "$schema": draft,
        "$id": "https://example.test/tiny.schema.json",
        "type": "object",
        "required": ["id", "at"],
        "properties": {
            "id": { "$ref": format!("#/{defs_keyword}/Id") },
            "at": { "type": "string", "format": "date-time" },
            "contact": { "type": "string", "format": "email" },
            "home": { "type": "string", "format": "uri" },
            "key": { "type": "string", "format": "uuid" }
        },
        "additionalProperties": false,
        defs_keyword: {
            "Id": { "type": "string", "minLength": 1 },
            "Pair": {
                "type": "array",
                "prefixItems": [{ "$ref": format!("#/{defs_keyword}/Id") }],
                "items": { "$ref": format!("#/{defs_keyword}/Id") },
                "minItems": 2
            }
        }
    })
}

fn valid_message() -> Value {
    json!({
        "id": "a",
        "at": "2026-01-02T03:04:05Z",
        "contact": "dev@example.test",
        "home": "https://example.test/x",
        "key": "3f0e6c1a-6f1d-4c55-9a57-1a3c3b1d9e10"
    })
}

/// Instances each breaking exactly one rule, with the pointer every validator reports for it.
fn invalid_messages() -> Vec<(Value, &'static str)> {
    vec![
        (json!({ "id": "", "at": "2026-01-02T03:04:05Z" }), "/id"),
        (json!({ "id": "a", "at": "yesterday" }), "/at"),
        (
            json!({ "id": "a", "at": "2026-01-02T03:04:05Z", "contact": "nobody" }),
            "/contact",
        ),
        (
            json!({ "id": "a", "at": "2026-01-02T03:04:05Z", "home": "not a uri" }),
            "/home",
        ),
        (
            json!({ "id": "a", "at": "2026-01-02T03:04:05Z", "key": "not-a-uuid" }),
            "/key",
        ),
        (
            json!({ "id": "a", "at": "2026-01-02T03:04:05Z", "extra": 1 }),
            "",
        ),
    ]
}

fn instances() -> Vec<Value> {
    let mut all = vec![valid_message()];
    all.extend(invalid_messages().into_iter().map(|(instance, _)| instance));
    all
}

fn assert_tiny_verdicts(validator: &str, verdicts: &[Verdict]) {
    assert_eq!(verdicts.len(), 1 + invalid_messages().len(), "{validator}");
    assert_eq!(
        verdicts[0],
        Verdict {
            valid: true,
            first_error_instance_path: None,
            errors: vec![]
        },
        "{validator}: the valid message"
    );
    for ((instance, pointer), verdict) in invalid_messages().iter().zip(&verdicts[1..]) {
        assert!(!verdict.valid, "{validator} accepted {instance}");
        assert_eq!(
            verdict.first_error_instance_path.as_deref(),
            Some(*pointer),
            "{validator} on {instance}: {:?}",
            verdict.errors
        );
        assert!(!verdict.errors.is_empty(), "{validator} on {instance}");
    }
}

#[test]
fn ajv_judges_draft_07_and_2020_12() {
    for (draft, keyword) in [
        ("http://json-schema.org/draft-07/schema#", "definitions"),
        ("https://json-schema.org/draft/2020-12/schema", "$defs"),
    ] {
        let schema = write_temp_json(&tiny_schema(draft, keyword));
        assert_tiny_verdicts(
            &format!("ajv {draft}"),
            &ajv_verdicts(schema.path(), None, &instances()),
        );
    }
}

#[test]
fn python_jsonschema_judges_draft_07_and_2020_12() {
    for (draft, keyword) in [
        ("http://json-schema.org/draft-07/schema#", "definitions"),
        ("https://json-schema.org/draft/2020-12/schema", "$defs"),
    ] {
        let schema = write_temp_json(&tiny_schema(draft, keyword));
        assert_tiny_verdicts(
            &format!("jsonschema {draft}"),
            &py_jsonschema_verdicts(schema.path(), None, &instances()),
        );
    }
}

#[test]
fn named_definitions_resolve_refs_from_the_document_root() {
    let schema = write_temp_json(&tiny_schema(
        "https://json-schema.org/draft/2020-12/schema",
        "$defs",
    ));
    let pairs = [
        json!(["a", "b"]),
        json!(["a"]),
        json!(["a", ""]),
        json!("a"),
    ];
    let expected = [
        (true, None),
        (false, Some("")),
        (false, Some("/1")),
        (false, Some("")),
    ];
    for (name, verdicts) in [
        ("ajv", ajv_verdicts(schema.path(), Some("Pair"), &pairs)),
        (
            "jsonschema",
            py_jsonschema_verdicts(schema.path(), Some("Pair"), &pairs),
        ),
    ] {
        let got: Vec<(bool, Option<&str>)> = verdicts
            .iter()
            .map(|v| (v.valid, v.first_error_instance_path.as_deref()))
            .collect();
        assert_eq!(got, expected, "{name}: {verdicts:?}");
    }
}

#[test]
fn draft_07_named_definition_uses_definitions() {
    let schema = write_temp_json(&tiny_schema(
        "http://json-schema.org/draft-07/schema#",
        "definitions",
    ));
    let ids = [json!("x"), json!(""), json!(7)];
    for (name, verdicts) in [
        ("ajv", ajv_verdicts(schema.path(), Some("Id"), &ids)),
        (
            "jsonschema",
            py_jsonschema_verdicts(schema.path(), Some("Id"), &ids),
        ),
    ] {
        let valid: Vec<bool> = verdicts.iter().map(|v| v.valid).collect();
        assert_eq!(valid, [true, false, false], "{name}: {verdicts:?}");
    }
}

/// Ajv 8 applies keywords beside `$ref` even in draft-07, where the specification (and Python
/// jsonschema) ignores them; cross-validator tests must not rely on either reading.
#[test]
fn draft_07_ref_siblings_split_ajv_and_jsonschema() {
    let schema = write_temp_json(&json!({
        "$schema": "http://json-schema.org/draft-07/schema#",
        "definitions": { "S": { "type": "string" } },
        "properties": { "a": { "$ref": "#/definitions/S", "maxLength": 2 } }
    }));
    let instances = [json!({ "a": "abcdef" })];
    assert!(!ajv_verdicts(schema.path(), None, &instances)[0].valid);
    assert!(py_jsonschema_verdicts(schema.path(), None, &instances)[0].valid);
}

#[test]
fn an_empty_batch_starts_no_process() {
    assert!(ajv_verdicts("/nonexistent/schema.json", None, &[]).is_empty());
}

#[test]
#[should_panic(expected = "definition \"Nope\" not found")]
fn an_unknown_definition_fails_loudly() {
    let schema = write_temp_json(&tiny_schema(
        "https://json-schema.org/draft/2020-12/schema",
        "$defs",
    ));
    ajv_verdicts(schema.path(), Some("Nope"), &[json!(1)]);
}

#[test]
fn chainlesschain_sdk_judges_messages_and_definitions() {
    let decisions = [
        json!({ "kind": "acceptOnce" }),
        json!({ "kind": "acceptForTurn", "permissions": [] }),
        json!({ "kind": "maybe" }),
        json!({ "kind": "acceptOnce", "extra": true }),
    ];
    let verdicts = cc_sdk_verdicts(&decisions, Some("ApprovalDecision"));
    let valid: Vec<bool> = verdicts.iter().map(|v| v.valid).collect();
    assert_eq!(valid, [true, true, false, false], "{verdicts:?}");
    assert_eq!(verdicts[2].first_error_instance_path.as_deref(), Some(""));

    let identifiers = [json!("thread-1"), json!("")];
    let verdicts = cc_sdk_verdicts(&identifiers, Some("Identifier"));
    assert_eq!(
        verdicts[1],
        Verdict {
            valid: false,
            first_error_instance_path: Some(String::new()),
            errors: vec![
                "# must have length >= 1".to_owned(),
                "# must match pattern".to_owned()
            ],
        }
    );

    let messages = [json!({ "not": "a protocol message" })];
    let verdicts = cc_sdk_verdicts(&messages, None);
    assert!(!verdicts[0].valid, "{verdicts:?}");
}

#[test]
fn chainlesschain_sdk_agrees_with_jsonschema_on_its_own_schema() {
    let schema = chainlesschain_schema_path();
    let decisions = [
        json!({ "kind": "acceptOnce" }),
        json!({ "kind": "decline", "reason": "no" }),
        json!({ "kind": "decline", "reason": 3 }),
        json!({}),
    ];
    let sdk: Vec<bool> = cc_sdk_verdicts(&decisions, Some("ApprovalDecision"))
        .iter()
        .map(|v| v.valid)
        .collect();
    let py: Vec<bool> = py_jsonschema_verdicts(&schema, Some("ApprovalDecision"), &decisions)
        .iter()
        .map(|v| v.valid)
        .collect();
    let ajv: Vec<bool> = ajv_verdicts(&schema, Some("ApprovalDecision"), &decisions)
        .iter()
        .map(|v| v.valid)
        .collect();
    assert_eq!(sdk, [true, true, false, false]);
    assert_eq!(py, sdk);
    assert_eq!(ajv, sdk);
}

#[test]
fn openclaw_schema_is_the_published_file() {
    let path = openclaw_schema_path();
    assert_eq!(sha256_hex(&path), OPENCLAW_SCHEMA_SHA256);
    let schema = read_json(&path);
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-07/schema#");
    let definitions = schema["definitions"]
        .as_object()
        .map_or(0, |defs| defs.len());
    assert_eq!(definitions, 877);
}

#[test]
fn openclaw_frames_are_judged_alike_by_ajv_and_jsonschema() {
    let schema = openclaw_schema_path();
    let frames = [
        json!({ "type": "req", "id": "1", "method": "health", "params": {} }),
        json!({ "type": "req", "id": 1, "method": "health" }),
        json!({ "type": "event", "event": "tick", "payload": { "ts": 1 } }),
        json!({ "type": "res", "id": "1", "ok": true, "extra": 0 }),
        json!({ "type": "nope" }),
    ];
    let ajv: Vec<bool> = ajv_verdicts(&schema, None, &frames)
        .iter()
        .map(|v| v.valid)
        .collect();
    let py: Vec<bool> = py_jsonschema_verdicts(&schema, None, &frames)
        .iter()
        .map(|v| v.valid)
        .collect();
    assert_eq!(ajv, [true, false, true, false, false]);
    assert_eq!(py, ajv);
}

#[test]
fn chainlesschain_schema_is_the_published_one() {
    let schema = read_json(chainlesschain_schema_path());
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    let definitions = schema["$defs"].as_object().map_or(0, |defs| defs.len());
    assert_eq!(definitions, CHAINLESSCHAIN_DEFINITION_COUNT);
    assert_eq!(
        chainlesschain_published_digest(),
        CHAINLESSCHAIN_SCHEMA_DIGEST
    );
}

#[test]
fn shared_peers_are_beside_the_repository() {
    assert!(repo_root().join("Cargo.toml").is_file());
    assert!(shared_dir().join("peers").is_dir());
    let roll = peer_fixture("roll-agent/fixtures");
    assert!(roll.is_dir());
}

#[test]
#[should_panic(expected = "missing peer fixture")]
fn a_missing_peer_fixture_fails_loudly() {
    peer_fixture("no-such-peer/fixture.json");
}

#[test]
fn tsc_compiles_strict_typescript() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.ts");
    std::fs::write(&good, "export const n: number = 1;\n").expect("write");
    run_ok(require_tsc().args(["--strict", "--noEmit"]).arg(&good));

    let bad = dir.path().join("bad.ts");
    std::fs::write(&bad, "export const n: number = \"one\";\n").expect("write");
    let output = require_tsc()
        .args(["--strict", "--noEmit"])
        .arg(&bad)
        .output()
        .expect("tsc");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("TS2322"));
}

#[test]
fn mypy_checks_strict_python() {
    let dir = tempfile::tempdir().expect("temp dir");
    let good = dir.path().join("good.py");
    std::fs::write(&good, "def f(x: int) -> int:\n    return x + 1\n").expect("write");
    run_ok(
        require_mypy()
            .args(["--strict", "--no-incremental"])
            .arg(&good),
    );

    let bad = dir.path().join("bad.py");
    std::fs::write(&bad, "def f(x: int) -> str:\n    return x\n").expect("write");
    let output = require_mypy()
        .args(["--strict", "--no-incremental"])
        .arg(&bad)
        .output()
        .expect("mypy");
    assert!(!output.status.success());
    assert!(String::from_utf8_lossy(&output.stdout).contains("Incompatible return value type"));
}

#[test]
fn python_tool_scripts_pass_mypy_strict() {
    let out = run_ok(
        require_mypy()
            .args(["--strict", "--no-incremental"])
            .arg(repo_root().join("tools/python")),
    );
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("Success: no issues found"));
}

#[test]
fn a_loopback_namespace_has_only_lo_and_keeps_what_is_written_in_its_scratch_folder() {
    let ns = LoopbackNamespace::new(&[]);
    let script = "ip -o link | cut -d: -f2; echo \"$HOME\"; echo \"${OPENCLAW_A:-} ${OPENCLAW_B:-}\"; \
                  touch /tmp/written-inside";
    let out = run_ok(
        ns.command_with_env(&[("OPENCLAW_A", "given")], "sh")
            .args(["-c", script])
            .env("OPENCLAW_B", "inherited"),
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = stdout.lines().map(str::trim).collect();
    let home = ns.scratch().join("home");
    assert_eq!(lines, ["lo", home.to_str().unwrap(), "given"], "{stdout}");
    assert!(ns.scratch().join("tmp/written-inside").is_file());
    // A second process enters the same namespace: it sees the first one's /tmp.
    run_ok(ns.command("test").args(["-f", "/tmp/written-inside"]));
    // Nothing but loopback answers.
    let out = ns
        .command("ip")
        .args(["route", "get", "192.0.2.1"])
        .output()
        .expect("ip");
    assert!(!out.status.success());
}

#[test]
fn the_real_openclaw_runs_on_node_24() {
    let openclaw = require_openclaw();
    let out = run_ok(std::process::Command::new(openclaw.node()).arg("--version"));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("v24."));
    let package = read_json(openclaw.entry().with_file_name("package.json"));
    assert_eq!(package["version"], "2026.9.6");
}

#[test]
fn node_and_python_load_their_packages() {
    let ws = require_node_module("ws");
    assert!(ws.join("package.json").is_file());
    let out = run_ok(require_node().args([
        "--input-type=module",
        "-e",
        "import { createRequire } from 'node:module'; \
         const r = createRequire(process.env.AGENTWIRE_TOOLS_NODE + '/package.json'); \
         console.log(typeof r('ws').WebSocket, typeof r('playwright-core').chromium.launch)",
    ]));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "function function"
    );

    let out = run_ok(require_python().args(["-c", "import websockets, jsonschema; print('ok')"]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "ok");
}

#[test]
fn kotlinc_compiles_and_runs_kotlin() {
    let dir = tempfile::tempdir().expect("temp dir");
    let source = dir.path().join("Hello.kt");
    std::fs::write(
        &source,
        "fun main() {\n    println(\"hello from kotlin\")\n}\n",
    )
    .expect("write");
    let jar = dir.path().join("hello.jar");
    run_ok(
        require_kotlinc()
            .arg(&source)
            .arg("-include-runtime")
            .arg("-d")
            .arg(&jar),
    );
    let out = run_ok(std::process::Command::new("java").arg("-jar").arg(&jar));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "hello from kotlin"
    );
}

#[test]
fn headless_chromium_renders_a_page() {
    let dir = tempfile::tempdir().expect("temp dir");
    let page = dir.path().join("page.html");
    std::fs::write(
        &page,
        "<!doctype html><title>t</title><p id=out></p>\
         <script>document.getElementById('out').textContent = 'rendered ' + (6 * 7);</script>",
    )
    .expect("write");
    let profile = dir.path().join("profile");
    let out = run_ok(
        chromium_headless(&profile)
            .arg("--dump-dom")
            .arg(format!("file://{}", page.display())),
    );
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("<p id=\"out\">rendered 42</p>"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}

#[test]
fn playwright_drives_headless_chromium() {
    require_chromium();
    let browser_lib = repo_root().join("tools/node/lib/browser.mjs");
    let script = format!(
        "import {{ launchChromium }} from {url:?};\n\
         const browser = await launchChromium();\n\
         try {{\n\
           const page = await browser.newPage();\n\
           await page.setContent('<button onclick=\"this.textContent = 6 * 7\">go</button>');\n\
           await page.click('button');\n\
           console.log(await page.textContent('button'));\n\
         }} finally {{ await browser.close(); }}",
        url = format!("file://{}", browser_lib.display())
    );
    let out = run_ok(require_node().args(["--input-type=module", "-e", &script]));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "42");
}

#[test]
fn files_are_listed_in_name_order() {
    let dir = tempfile::tempdir().expect("temp dir");
    for name in ["b.json", "a.json", "c.txt"] {
        std::fs::write(dir.path().join(name), "{}").expect("write");
    }
    let names: Vec<String> = files_with_extension(dir.path(), "json")
        .iter()
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    assert_eq!(names, ["a.json", "b.json"]);
}

/// `scripts/test.sh` itself: its temporary build folders, its leftovers check, its disk check.
mod test_command {
    #![allow(clippy::expect_used)]

    use agentwire_testkit::{repo_root, run_ok};

    /// A copy of `scripts/test.sh` in a scratch repository whose installer and fuzz script do
    /// nothing and whose `cargo` is a stub: `STUB_BUILD` says whether `cargo build` succeeds, and
    /// `cargo test` leaves a file in the clone and one in its `TMPDIR`. Every `cargo` call writes a
    /// file into its `CARGO_TARGET_DIR` and logs that folder.
    struct ScriptSandbox {
        root: tempfile::TempDir,
    }

    impl ScriptSandbox {
        fn new() -> ScriptSandbox {
            let root = tempfile::tempdir().expect("temp dir");
            let repo = root.path().join("repo");
            let scripts = repo.join("scripts");
            std::fs::create_dir_all(&scripts).expect("mkdir scripts");
            std::fs::copy(repo_root().join("scripts/test.sh"), scripts.join("test.sh"))
                .expect("copy test.sh");
            for stub in ["install-test-tools.sh", "fuzz.sh"] {
                write_executable(&scripts.join(stub), "#!/bin/sh\nexit 0\n");
            }
            std::fs::create_dir_all(root.path().join("shared/peers")).expect("mkdir shared");
            std::fs::create_dir_all(root.path().join("bin")).expect("mkdir bin");
            write_executable(
                &root.path().join("bin/cargo"),
                "#!/bin/sh\n\
                 echo \"$CARGO_TARGET_DIR\" >>\"$STUB_LOG\"\n\
                 mkdir -p \"$CARGO_TARGET_DIR\" && echo built >\"$CARGO_TARGET_DIR/$1.out\"\n\
                 case \"$1\" in\n\
                   build) [ \"$STUB_BUILD\" = ok ] ;;\n\
                   test) echo stray >left-behind.txt; echo stray >\"$TMPDIR/stray\" ;;\n\
                 esac\n",
            );
            std::fs::create_dir_all(root.path().join("tmp")).expect("mkdir tmp");
            std::fs::write(repo.join(".gitignore"), "/.tools/\n").expect("write .gitignore");
            let git = |args: &[&str]| {
                run_ok(
                    std::process::Command::new("git")
                        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
                        .args(args)
                        .current_dir(&repo),
                )
            };
            git(&["init", "-q"]);
            git(&["add", "."]);
            git(&["commit", "-q", "-m", "scratch"]);
            ScriptSandbox { root }
        }

        fn path(&self, rel: &str) -> std::path::PathBuf {
            self.root.path().join(rel)
        }

        fn run(&self, build: &str) -> std::process::Output {
            let path = format!(
                "{}:{}",
                self.path("bin").display(),
                std::env::var("PATH").unwrap_or_default()
            );
            std::process::Command::new("bash")
                .arg(self.path("repo/scripts/test.sh"))
                .env("CI", "true")
                .env("PATH", path)
                .env("TMPDIR", self.path("tmp"))
                .env("AGENTWIRE_MIN_FREE_GIB", "0")
                .env("STUB_LOG", self.path("cargo.log"))
                .env("STUB_BUILD", build)
                .env_remove("CARGO_TARGET_DIR")
                .env_remove("AGENTWIRE_SHARED_DIR")
                .current_dir(self.path("repo"))
                .output()
                .expect("run test.sh")
        }

        fn build_folders(&self) -> Vec<String> {
            let log = std::fs::read_to_string(self.path("cargo.log")).expect("cargo.log");
            let mut folders: Vec<String> = log.lines().map(str::to_owned).collect();
            folders.dedup();
            folders
        }

        fn tmp_entries(&self) -> Vec<String> {
            let mut names: Vec<String> = std::fs::read_dir(self.path("tmp"))
                .expect("read tmp")
                .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
                .collect();
            names.sort();
            names
        }
    }

    fn write_executable(path: &std::path::Path, text: &str) {
        use std::os::unix::fs::PermissionsExt;
        std::fs::write(path, text).expect("write stub");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755)).expect("chmod stub");
    }

    #[test]
    fn the_test_command_in_ci_removes_its_build_folder_when_the_build_fails() {
        let sandbox = ScriptSandbox::new();
        // An earlier run killed with SIGKILL: its process is gone, its folder is not.
        let stale = sandbox.path("tmp/agentwire-test.stale");
        std::fs::create_dir_all(stale.join("target")).expect("mkdir stale");
        let mut gone = std::process::Command::new("true").spawn().expect("spawn");
        let gone_pid = gone.id();
        gone.wait().expect("wait");
        std::fs::write(stale.join("pid"), format!("{gone_pid}\n")).expect("write pid");

        let out = sandbox.run("fails");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("FAILED: cargo build --workspace --all-targets"),
            "{stderr}"
        );
        let folders = sandbox.build_folders();
        assert_eq!(
            folders.len(),
            1,
            "one build folder for every step: {folders:?}"
        );
        assert!(
            folders[0].starts_with(&format!(
                "{}/agentwire-test.",
                sandbox.path("tmp").display()
            )),
            "the build goes to a temporary folder outside the clone: {folders:?}"
        );
        assert_eq!(
            sandbox.tmp_entries(),
            Vec::<String>::new(),
            "the run's own folder and the stale one are removed"
        );
    }

    #[test]
    fn the_test_command_fails_naming_what_the_tests_left_behind() {
        let sandbox = ScriptSandbox::new();
        let out = sandbox.run("ok");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(
            stderr.contains("the run changed or left in the clone")
                && stderr.contains("left-behind.txt"),
            "{stderr}"
        );
        assert!(
            stderr.contains("the tests left in their temporary folder") && stderr.contains("stray"),
            "{stderr}"
        );
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(stdout.contains("test.sh: step times:"), "{stdout}");
        assert_eq!(sandbox.tmp_entries(), Vec::<String>::new());
    }

    #[test]
    fn the_test_command_fails_at_once_when_the_disk_is_too_full() {
        let sandbox = ScriptSandbox::new();
        let out = std::process::Command::new("bash")
            .arg(sandbox.path("repo/scripts/test.sh"))
            .env("CI", "true")
            .env("TMPDIR", sandbox.path("tmp"))
            // More than any disk holds.
            .env("AGENTWIRE_MIN_FREE_GIB", "1000000000")
            .env_remove("CARGO_TARGET_DIR")
            .env_remove("AGENTWIRE_SHARED_DIR")
            .output()
            .expect("run test.sh");
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(1), "{stderr}");
        assert!(stderr.contains("free on the disk that holds"), "{stderr}");
        assert!(!sandbox.path("cargo.log").exists(), "nothing was built");
        assert_eq!(sandbox.tmp_entries(), Vec::<String>::new());
    }
}
