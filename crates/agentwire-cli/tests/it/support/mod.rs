//! What the command-line tests share: the binary under test as a [`Cli`] run, a raw App Server
//! connection ([`app_server_host`]), and a scripted Roll host over a real pipe ([`roll_host`]).

pub(crate) mod app_server_host;
pub(crate) mod roll_host;

pub(crate) use agentwire_testkit::{Cli, dir_with, utf8};

/// The `agentwire` binary built with these tests.
pub(crate) const BIN: &str = env!("CARGO_BIN_EXE_agentwire");

/// A run of the `agentwire` binary.
pub(crate) fn agentwire() -> Cli {
    Cli::new(BIN)
}

/// What a run printed on standard output, as text.
pub(crate) fn stdout(output: &std::process::Output) -> String {
    utf8(&output.stdout)
}

/// `agentwire --format json compat --definitions NAMES OLD NEW`: its exit code and JSON report.
pub(crate) fn compat_definitions(
    names: &[&str],
    old: &std::path::Path,
    new: &std::path::Path,
) -> (Option<i32>, serde_json::Value) {
    let out = agentwire()
        .args([
            "--format",
            "json",
            "compat",
            "--definitions",
            &names.join(","),
        ])
        .arg(old)
        .arg(new)
        .output();
    let report = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    (out.status.code(), report)
}

/// Held by the tests that load the machine for long (the real OpenClaw gateway, a thousand
/// connections, bursts of 100,000 events across killed runtimes), so that they run one at a
/// time instead of starving each other's deadlines on a 2-core machine. Async tests take it with
/// `lock().await`, the others with `blocking_lock()`.
pub(crate) static HEAVY: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
