//! Our OpenClaw gateway face held to the real OpenClaw artifacts (npm `openclaw@2026.9.6`, on
//! Node.js 24): the real CLI reads health and sessions from our gateway, and the real gateway
//! and ours answer the same protocol client cases alike, but for the differences listed in
//! [`DIFFERENCES`] with their reasons. Everything runs inside one loopback-only namespace per test
//! (`tools/ns/loopback.sh`), with `/tmp` and `HOME` in its scratch folder.

use std::collections::BTreeSet;
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Output, Stdio};
use std::time::{Duration, Instant};

use agentwire_testkit::{LoopbackNamespace, OpenClaw, require_openclaw};
use serde_json::{Value, json};

use crate::gateway_face::{Gateway, check_frames, start_with};
use crate::support::BIN;

const TOKEN: &str = "T0ken-abc";

/// The real gateway's port inside the namespace (each test has its own loopback, so a fixed
/// port is free).
const REAL_PORT: u16 = 28789;

/// How long the real gateway may take to stop after SIGTERM (it took 0.3–0.4 s).
const STOP_LIMIT: Duration = Duration::from_secs(20);

/// Our gateway in `ns`, with `--token TOKEN`.
fn ours(ns: &LoopbackNamespace) -> Gateway {
    start_with(ns.command(BIN), ns.scratch(), &["--token", TOKEN])
}

/// The real CLI in `ns` with `args` and the variables `env`; its output, whatever its status.
fn cli(openclaw: &OpenClaw, ns: &LoopbackNamespace, env: &[(&str, &str)], args: &[&str]) -> Output {
    openclaw
        .command(ns, env)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

/// The real CLI's JSON answer to `args`; fails when it exits unsuccessfully.
fn cli_json(
    openclaw: &OpenClaw,
    ns: &LoopbackNamespace,
    env: &[(&str, &str)],
    args: &[&str],
) -> Value {
    let output = cli(openclaw, ns, env, args);
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "openclaw {args:?} failed with {}\n--- stdout ---\n{stdout}\n--- stderr ---\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("openclaw {args:?}: {e}: {stdout}"))
}

/// `openclaw gateway call METHOD --json --url URL --token TOKEN [--params PARAMS]`.
fn call_args<'a>(method: &'a str, url: &'a str, params: Option<&'a str>) -> Vec<&'a str> {
    let mut args = vec![
        "gateway", "call", method, "--json", "--url", url, "--token", TOKEN,
    ];
    if let Some(params) = params {
        args.extend(["--params", params]);
    }
    args
}

/// Runs a driver scenario inside `ns` against the gateway on `port`; its report.
fn drive_in(ns: &LoopbackNamespace, port: u16, scenario: &str) -> Value {
    let mut driver = agentwire_testkit::python_script("gateway_driver.py");
    driver.arg(port.to_string()).arg(TOKEN).arg(scenario);
    let output = ns.wrap(&driver).stdin(Stdio::null()).output().unwrap();
    assert!(
        output.status.success(),
        "the driver ({scenario}, port {port}) failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    serde_json::from_slice(&output.stdout).unwrap()
}

/// The real gateway, started inside a namespace; stopped with SIGTERM by its process id.
struct RealGateway {
    child: Child,
    log: std::path::PathBuf,
    stopped: bool,
}

impl RealGateway {
    /// `openclaw gateway run` on `REAL_PORT`, loopback only, token auth, no config; waits until
    /// it answers `connect` with hello-ok (it answers UNAVAILABLE and closes 1013 for a few
    /// seconds after its port opens).
    fn start(openclaw: &OpenClaw, ns: &LoopbackNamespace) -> Self {
        let log = ns.scratch().join("real-gateway.log");
        let out = File::create(&log).unwrap();
        let child = openclaw
            .command(ns, &[])
            .args(["gateway", "run", "--port", &REAL_PORT.to_string()])
            .args(["--bind", "loopback", "--auth", "token", "--token", TOKEN])
            .arg("--allow-unconfigured")
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .unwrap();
        let mut gateway = Self {
            child,
            log,
            stopped: false,
        };
        let ready = drive_in(ns, REAL_PORT, "ready");
        if ready["ready"] != true {
            panic!(
                "the real gateway did not answer connect with hello-ok: {}\n--- its log ---\n{}",
                json!({"attempts": ready["attempts"], "last": ready["last"]}),
                gateway.log_text()
            );
        }
        if let Ok(Some(status)) = gateway.child.try_wait() {
            panic!(
                "the real gateway exited with {status}: {}",
                gateway.log_text()
            );
        }
        gateway
    }

    fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// SIGTERM to its process id, then waits for it to exit.
    fn stop(&mut self) -> ExitStatus {
        self.stopped = true;
        let pid = self.child.id().to_string();
        let sent = Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(sent.success(), "kill -TERM {pid} failed");
        let started = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            if started.elapsed() > STOP_LIMIT {
                let _ = self.child.kill();
                let _ = self.child.wait();
                panic!(
                    "the real gateway (pid {pid}) did not stop within {STOP_LIMIT:?} of SIGTERM"
                );
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

impl Drop for RealGateway {
    fn drop(&mut self) {
        if !self.stopped {
            let pid = self.child.id().to_string();
            let _ = Command::new("kill").args(["-TERM", &pid]).status();
            let started = Instant::now();
            while started.elapsed() < STOP_LIMIT {
                if let Ok(Some(_)) = self.child.try_wait() {
                    return;
                }
                std::thread::sleep(Duration::from_millis(50));
            }
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

#[test]
fn the_real_openclaw_cli_reads_health_and_sessions_from_our_gateway() {
    let _heavy = crate::support::HEAVY.blocking_lock();
    let openclaw = require_openclaw();
    let ns = LoopbackNamespace::new(&[Path::new(BIN)]);
    let gateway = ours(&ns);
    let url = format!("ws://127.0.0.1:{}", gateway.port);

    let health = cli_json(&openclaw, &ns, &[], &call_args("health", &url, None));
    assert_eq!(health["ok"], true, "{health}");
    assert_eq!(health["defaultAgentId"], "main", "{health}");

    // `openclaw health` has no --url or --token: it reads them from the environment.
    let env = [
        ("OPENCLAW_GATEWAY_URL", url.as_str()),
        ("OPENCLAW_GATEWAY_TOKEN", TOKEN),
    ];
    let health = cli_json(&openclaw, &ns, &env, &["health", "--json"]);
    assert_eq!(health["ok"], true, "{health}");
    let text = cli(&openclaw, &ns, &env, &["health"]);
    let stdout = String::from_utf8_lossy(&text.stdout);
    assert!(
        text.status.success(),
        "{stdout}{}",
        String::from_utf8_lossy(&text.stderr)
    );
    assert!(stdout.contains("Agents: main (default)"), "{stdout}");

    let empty = cli_json(&openclaw, &ns, &[], &call_args("sessions.list", &url, None));
    assert_eq!(
        (
            empty["count"].clone(),
            empty["sessions"].clone(),
            empty["hasMore"].clone()
        ),
        (json!(0), json!([]), json!(false)),
        "{empty}"
    );

    // A turn through the CLI, then the session it made is listed and its history holds the
    // demo agent's answer.
    let chat = r#"{"sessionKey":"team","message":"hello from the cli","idempotencyKey":"cli-1"}"#;
    let started = cli_json(
        &openclaw,
        &ns,
        &[],
        &call_args("chat.send", &url, Some(chat)),
    );
    assert_eq!(started["status"], "started", "{started}");
    let history_params = r#"{"sessionKey":"team"}"#;
    let deadline = Instant::now() + Duration::from_secs(20);
    let history = loop {
        let history = cli_json(
            &openclaw,
            &ns,
            &[],
            &call_args("chat.history", &url, Some(history_params)),
        );
        if history["messages"].as_array().is_some_and(|m| m.len() >= 2) || Instant::now() > deadline
        {
            break history;
        }
        std::thread::sleep(Duration::from_millis(200));
    };
    assert_eq!(
        history["messages"][1]["content"][0]["text"], "echo: hello from the cli",
        "{history}"
    );
    let listed = cli_json(&openclaw, &ns, &[], &call_args("sessions.list", &url, None));
    assert_eq!(listed["count"], 1, "{listed}");
    let session = &listed["sessions"][0];
    assert_eq!(session["key"], "team", "{listed}");
    assert_eq!(session["agentId"], "main", "{listed}");
    assert!(session["sessionId"].is_string(), "{listed}");

    // The CLI reached our gateway: with a wrong token ours refuses it, in our words.
    let mut wrong = call_args("health", &url, None);
    let at = wrong.iter().position(|a| *a == TOKEN).unwrap();
    wrong[at] = "nope";
    let refused = cli(&openclaw, &ns, &[], &wrong);
    assert!(!refused.status.success());
    let answer: Value = serde_json::from_slice(&refused.stdout).unwrap();
    assert_eq!(answer["ok"], false, "{answer}");
    assert_eq!(
        answer["error"]["details"]["code"], "AUTH_TOKEN_MISMATCH",
        "{answer}"
    );
    assert_eq!(
        answer["error"]["message"],
        "unauthorized: gateway token mismatch (use this gateway's token)"
    );
    drop(gateway);
}

/// A field of one case where the real gateway and ours answer differently, the two answers (as
/// JSON text), and why. A listed difference that goes away fails the test as much as a new one.
struct Difference {
    case: &'static str,
    field: &'static str,
    real: &'static str,
    ours: &'static str,
    why: &'static str,
}

const DIFFERENCES: &[Difference] = &[
    Difference {
        case: "not_json",
        field: "close",
        real: "1000",
        ours: "1008",
        why: "a first frame that is not JSON: the real gateway's parse failure ends the socket \
              with a normal close and no reason; ours closes it like any other first frame that \
              is not a request (1008 \"invalid request frame\", as for a JSON non-request)",
    },
    Difference {
        case: "no_token",
        field: "error",
        real: r#""NOT_PAIRED""#,
        ours: r#""INVALID_REQUEST""#,
        why: "no token: the real gateway falls back to device pairing and asks for a device \
              identity; ours has no device pairing, so a gateway with a token says the token is \
              missing",
    },
    Difference {
        case: "no_token",
        field: "detail",
        real: r#""DEVICE_IDENTITY_REQUIRED""#,
        ours: r#""AUTH_TOKEN_MISSING""#,
        why: "as the error code: device pairing there, a missing token here",
    },
    Difference {
        case: "numeric_id",
        field: "id",
        real: "7",
        ours: r#""7""#,
        why: "the real gateway echoes a numeric id as a number, which its own ResponseFrame \
              schema refuses (id is a string); ours echoes it as a string so that every frame it \
              sends is valid",
    },
];

/// The cases `gateway_driver.py cases` reports, all of which are compared.
const CASES: &[&str] = &[
    "mismatch",
    "first_not_connect",
    "first_not_request",
    "not_json",
    "invalid_params",
    "wrong_token",
    "no_token",
    "preauth_over",
    "preauth_exact",
    "chat_send_read_scope",
    "unknown_method_read_scope",
    "numeric_id",
];

/// What is compared per case: whether a response came and its `ok`, its error `code` and
/// `details.code`, the close code (null while open), whether the connection still serves after
/// the case, and the id the response echoed.
const FIELDS: &[&str] = &[
    "answered",
    "ok",
    "error",
    "detail",
    "close",
    "open_after",
    "id",
];

#[test]
fn the_real_gateway_and_ours_answer_the_protocol_cases_alike_but_for_the_listed_differences() {
    let _heavy = crate::support::HEAVY.blocking_lock();
    let openclaw = require_openclaw();
    let ns = LoopbackNamespace::new(&[Path::new(BIN)]);
    let ours = ours(&ns);
    let mut real = RealGateway::start(&openclaw, &ns);

    let theirs = drive_in(&ns, REAL_PORT, "cases");
    let mine = drive_in(&ns, ours.port, "cases");
    check_frames(&mine["frames"]);

    let mut unexplained = Vec::new();
    let mut used = BTreeSet::new();
    for case in CASES {
        let (t, m) = (&theirs[case], &mine[case]);
        assert!(
            t.is_object() && m.is_object(),
            "case {case} missing: {t} {m}"
        );
        for field in FIELDS {
            let (tv, mv) = (t[field].clone(), m[field].clone());
            if tv == mv {
                continue;
            }
            let listed = DIFFERENCES.iter().position(|d| {
                d.case == *case
                    && d.field == *field
                    && serde_json::from_str::<Value>(d.real).unwrap() == tv
                    && serde_json::from_str::<Value>(d.ours).unwrap() == mv
            });
            match listed {
                Some(at) => {
                    used.insert(at);
                }
                None => unexplained.push(format!(
                    "{case}.{field}: real {tv}, ours {mv} (real: {t}, ours: {m})"
                )),
            }
        }
    }
    let stale: Vec<String> = DIFFERENCES
        .iter()
        .enumerate()
        .filter(|(at, _)| !used.contains(at))
        .map(|(_, d)| format!("{}.{}: {}", d.case, d.field, d.why))
        .collect();
    assert!(
        unexplained.is_empty(),
        "the gateways differ where DIFFERENCES says nothing:\n{}",
        unexplained.join("\n")
    );
    assert!(
        stale.is_empty(),
        "listed differences no longer seen (remove them from DIFFERENCES):\n{}",
        stale.join("\n")
    );
    // What both agree on, spelled out: the cases are not vacuous.
    assert_eq!(theirs["mismatch"]["close"], 1002);
    assert_eq!(theirs["wrong_token"]["detail"], "AUTH_TOKEN_MISMATCH");
    assert_eq!(theirs["preauth_over"]["close"], 1009);
    assert_eq!(theirs["preauth_exact"]["close"], 1008);
    assert_eq!(theirs["chat_send_read_scope"]["detail"], "MISSING_SCOPE");

    // The same CLI commands answer from both, and what ours answers is a part of the real
    // answer's shape.
    let mut keys = Vec::new();
    for (who, port) in [("real", REAL_PORT), ("ours", ours.port)] {
        let url = format!("ws://127.0.0.1:{port}");
        let health = cli_json(&openclaw, &ns, &[], &call_args("health", &url, None));
        assert_eq!(health["ok"], true, "{who}: {health}");
        let sessions = cli_json(&openclaw, &ns, &[], &call_args("sessions.list", &url, None));
        assert_eq!(sessions["count"], 0, "{who}: {sessions}");
        assert_eq!(sessions["sessions"], json!([]), "{who}: {sessions}");
        let top =
            |v: &Value| -> BTreeSet<String> { v.as_object().unwrap().keys().cloned().collect() };
        keys.push((top(&health), top(&sessions)));
    }
    let (real_keys, our_keys) = (&keys[0], &keys[1]);
    assert!(
        our_keys.0.is_subset(&real_keys.0) && our_keys.1.is_subset(&real_keys.1),
        "ours answers keys the real gateway does not: health {:?}, sessions.list {:?}",
        our_keys.0.difference(&real_keys.0).collect::<Vec<_>>(),
        our_keys.1.difference(&real_keys.1).collect::<Vec<_>>()
    );

    let status = real.stop();
    assert!(
        status.success(),
        "the real gateway exited with {status} after SIGTERM"
    );
    drop(ours);
}
