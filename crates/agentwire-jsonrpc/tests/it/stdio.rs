//! The current process's stdio as a transport: this test binary re-executes itself as a server
//! on its own stdin and stdout, and the parent drives it over real pipes.

use std::time::Duration;

use agentwire_jsonrpc::transport::{self, ChildProcess};
use agentwire_jsonrpc::{Handlers, Peer, Profile};
use serde_json::{Value, json};

/// Set in the environment of the re-executed test binary that serves on its stdio.
const CHILD_ENV: &str = "AGENTWIRE_JSONRPC_STDIO_CHILD";
/// The test binary's arguments that run only [`stdio_server_child`].
const CHILD_ARGS: [&str; 4] = ["--exact", "stdio::stdio_server_child", "--nocapture", "-q"];

/// The server half: only does something in the re-executed child. libtest's own first line on
/// stdout ("running 1 test") reaches the parent as a line that is not JSON, which it drops.
#[test]
fn stdio_server_child() {
    if std::env::var_os(CHILD_ENV).is_none() {
        return;
    }
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    runtime.block_on(async {
        let (stdin, stdout) = transport::stdio();
        let kinds = json!({
            "stdinPipe": stdin.is_pipe(),
            "stdoutPipe": stdout.is_pipe(),
            "stdoutPipeBytes": stdout.pipe_capacity(),
        });
        let handlers = Handlers::new()
            .on_request("kinds", move |_ctx, _params| {
                let kinds = kinds.clone();
                async move { Ok(kinds) }
            })
            .on_request("echo", |_ctx, params| async move {
                Ok(params.unwrap_or(Value::Null))
            });
        Peer::spawn(stdin, stdout, Profile::generic(), handlers)
            .closed()
            .await;
    });
    // Ends here, before libtest writes its summary to a stdout the parent no longer reads.
    std::process::exit(0);
}

/// Runs the child server through `sh -c SCRIPT` (`"$0"` is this binary, `"$@"` its test
/// arguments), then asks it how it reads and writes and echoes 2,000 requests, 16 at a time.
async fn drive(script: &str) -> Value {
    let mut command = tokio::process::Command::new("sh");
    command
        .arg("-c")
        .arg(script)
        .arg(std::env::current_exe().unwrap())
        .args(CHILD_ARGS)
        .env(CHILD_ENV, "1");
    let (mut child, stdout, stdin) = ChildProcess::spawn(command).unwrap();
    let peer = Peer::spawn(stdout, stdin, Profile::generic(), Handlers::new());
    let kinds: Value = peer.request("kinds", &json!({})).await.unwrap();
    let mut workers = Vec::new();
    for worker in 0..16u64 {
        let peer = peer.clone();
        workers.push(tokio::spawn(async move {
            for i in 0..125u64 {
                let params = json!({"worker": worker, "i": i, "text": "é✓ a line of text"});
                let echoed: Value = peer.request("echo", &params).await.unwrap();
                assert_eq!(echoed, params);
            }
        }));
    }
    for worker in workers {
        worker.await.unwrap();
    }
    assert_eq!(peer.stats().responses_received, 2_001);
    peer.close().await;
    let status = child.shutdown(Duration::from_secs(10)).await.unwrap();
    assert!(status.success(), "child: {status}; {}", child.stderr_tail());
    kinds
}

#[tokio::test]
async fn pipes_are_read_and_written_through_the_event_loop() {
    assert_eq!(
        drive(r#"exec "$0" "$@""#).await,
        json!({"stdinPipe": true, "stdoutPipe": true, "stdoutPipeBytes": 1 << 20})
    );
}

#[tokio::test]
async fn stdout_shared_with_stderr_is_written_by_a_blocking_thread() {
    // `2>&1`: a non-blocking stdout would make stderr non-blocking too.
    assert_eq!(
        drive(r#"exec "$0" "$@" 2>&1"#).await,
        json!({"stdinPipe": true, "stdoutPipe": false, "stdoutPipeBytes": null})
    );
}

#[tokio::test]
async fn stdin_that_is_not_a_pipe_is_read_by_a_blocking_thread() {
    // A Unix socket as stdin (how some hosts connect a child) is not a pipe.
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().unwrap();
    let mut child = tokio::process::Command::new(std::env::current_exe().unwrap())
        .args(CHILD_ARGS)
        .env(CHILD_ENV, "1")
        .stdin(std::process::Stdio::from(std::os::fd::OwnedFd::from(
            theirs,
        )))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .kill_on_drop(true)
        .spawn()
        .unwrap();
    ours.set_nonblocking(true).unwrap();
    let (_read, write) = tokio::net::UnixStream::from_std(ours).unwrap().into_split();
    let stdout = child.stdout.take().unwrap();
    let peer = Peer::spawn(stdout, write, Profile::generic(), Handlers::new());
    let kinds: Value = peer.request("kinds", &json!({})).await.unwrap();
    assert_eq!(
        kinds,
        json!({"stdinPipe": false, "stdoutPipe": true, "stdoutPipeBytes": 1 << 20})
    );
    let echoed: Value = peer.request("echo", &json!([1, "two"])).await.unwrap();
    assert_eq!(echoed, json!([1, "two"]));
    peer.close().await;
    let status = tokio::time::timeout(Duration::from_secs(10), child.wait())
        .await
        .unwrap()
        .unwrap();
    assert!(status.success(), "child: {status}");
}
