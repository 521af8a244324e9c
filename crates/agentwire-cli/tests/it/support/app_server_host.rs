//! A raw App Server connection for the tests that drive the face line by line: the face
//! served over an in-memory duplex, each line the host reads parsed and queued, and held to
//! the SDK's 64 KiB limit.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use agentwire_serve::app_server::AppServerFace;
use serde_json::Value;
use tokio::io::{AsyncBufReadExt, BufReader, DuplexStream, WriteHalf};
use tokio::sync::mpsc;

/// Serves a new connection of `face`; returns where the host writes and the lines it reads.
/// While `paused` is set the host reads nothing (a host that stopped reading).
pub(crate) fn connect(
    face: &Arc<AppServerFace>,
    paused: Arc<AtomicBool>,
) -> (WriteHalf<DuplexStream>, mpsc::UnboundedReceiver<Value>) {
    let (client, server) = tokio::io::duplex(1 << 20);
    let (server_read, server_write) = tokio::io::split(server);
    let face = Arc::clone(face);
    tokio::spawn(async move { face.serve(server_read, server_write).await });
    let (client_read, writer) = tokio::io::split(client);
    let (tx, lines) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        let mut reader = BufReader::new(client_read).lines();
        loop {
            while paused.load(Ordering::SeqCst) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            let Ok(Some(line)) = reader.next_line().await else {
                return;
            };
            assert!(line.len() <= 65_536, "a line over the SDK's limit");
            let value: Value = serde_json::from_str(&line).expect("a JSON line");
            if tx.send(value).is_err() {
                return;
            }
        }
    });
    (writer, lines)
}
