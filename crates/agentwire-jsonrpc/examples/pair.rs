//! A server and a client on one process pair: the client spawns this same program with
//! `--serve` and speaks JSON-RPC over the child's stdin and stdout; the server's handler asks
//! the client a question before it answers, the way a runtime asks its host for an approval.
//!
//! ```sh
//! cargo run -p agentwire-jsonrpc --example pair
//! RUST_LOG=debug cargo run -p agentwire-jsonrpc --example pair   # spans and counters on stderr
//! ```

use std::time::Duration;

use agentwire_jsonrpc::transport::{self, ChildProcess};
use agentwire_jsonrpc::{ErrorObject, Handlers, Peer, Profile};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

#[derive(Debug, Deserialize)]
struct RunParams {
    command: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct RunResult {
    command: String,
    approved: bool,
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    // stdout is the protocol in the server: every log goes to stderr.
    tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::from_default_env())
        .init();
    if std::env::args().nth(1).as_deref() == Some("--serve") {
        serve().await;
        return Ok(());
    }
    client().await
}

/// The server: answers `tool/run` after asking the client `approval/request`.
async fn serve() {
    let handlers =
        Handlers::new().on_typed_request("tool/run", |ctx, params: RunParams| async move {
            // The handler runs in its own task, so awaiting the other side blocks nothing else.
            let decision: Value = ctx
                .peer()
                .request("approval/request", &json!({ "command": params.command }))
                .await
                .map_err(|error| ErrorObject::new(-32000, format!("no decision: {error}")))?;
            Ok::<_, ErrorObject>(RunResult {
                approved: decision["decision"] == "approve",
                command: params.command,
            })
        });
    let (stdin, stdout) = transport::stdio();
    let peer = Peer::spawn(stdin, stdout, Profile::generic(), handlers);
    peer.closed().await;
}

/// The client: spawns the server, answers its approval requests, and runs two commands.
async fn client() -> Result<(), Box<dyn std::error::Error>> {
    let mut command = tokio::process::Command::new(std::env::current_exe()?);
    command.arg("--serve");
    let (mut child, stdout, stdin) = ChildProcess::spawn(command)?;
    let handlers = Handlers::new().on_request("approval/request", |_ctx, params| async move {
        let command = params
            .as_ref()
            .and_then(|p| p.get("command"))
            .and_then(Value::as_str)
            .unwrap_or_default();
        let decision = if command.starts_with("rm ") {
            "reject"
        } else {
            "approve"
        };
        Ok(json!({ "decision": decision }))
    });
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), handlers);
    for command in ["ls -l", "rm -rf /"] {
        let result: RunResult = peer
            .request("tool/run", &json!({ "command": command }))
            .await?;
        println!(
            "{}: {}",
            result.command,
            if result.approved {
                "approved"
            } else {
                "rejected"
            }
        );
    }
    let stats = peer.stats();
    println!(
        "client read {} lines ({} bytes) and wrote {} lines",
        stats.lines_read, stats.bytes_read, stats.lines_written
    );
    peer.close().await;
    let status = child.shutdown(Duration::from_secs(5)).await?;
    println!("server exited with {status}");
    Ok(())
}
