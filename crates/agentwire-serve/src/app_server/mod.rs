//! The ChainlessChain App Server face: JSON-RPC over NDJSON on stdio, as the ChainlessChain
//! SDKs' `AppServerClient` drives it (`<exe> serve --app-server`), on the runtime core.
//!
//! Every line written is one compact JSON object under 64 KiB (long text goes out as several
//! `item/delta`s, reads are paged), never blank and never with `id: null`; a line that cannot
//! be parsed is logged and dropped. `initialize` comes first and once. What the core publishes
//! on the connection's threads becomes the App Server's notifications in the order of a turn;
//! an approval is asked with the `approval/decide` server request, and anything but an
//! acceptance (a decline, an invalid decision, an error reply, no answer in time) rejects the
//! tool, failing closed.

/// The App Server protocol's types, generated from our schema
/// (`protocols/chainlesschain-app-server/app-server.schema.json`).
#[path = "../../../../protocols/chainlesschain-app-server/generated/rust/app_server.rs"]
#[rustfmt::skip]
pub mod protocol;
pub mod schema;
mod session;
pub mod wire;

use std::sync::Arc;
use std::time::Duration;

use agentwire_jsonrpc::{ErrorObject, Profile};
use agentwire_runtime::Runtime;
use serde_json::json;
use tokio::io::{AsyncRead, AsyncWrite};

/// The App Server protocol version served (the only one there is).
pub const PROTOCOL_VERSION: i64 = 1;

/// The features served, in the order `initialize` reports them.
pub const FEATURES: &[&str] = &[
    "thread_turn_item",
    "structured_approval",
    "durable_human_task",
    "bounded_transport",
];

/// The `$id` of the ChainlessChain schema ours is held to on the definitions they share (the
/// `chainlesschain-agent-sdk` 0.2.9 schema), reported in `initialize`'s `peerSchema`.
pub const PEER_SCHEMA_ID: &str =
    "https://schemas.chainlesschain.com/agent/cc-agent-protocol-v1.schema.json";

/// That schema's digest.
pub const PEER_SCHEMA_DIGEST: &str =
    "sha256:ff1860d17b798060c95cce217ff27bef2f99e209dcb369cf2d70514a4d6f08d7";

/// The default for [`AppServerConfig::approval_timeout`].
pub const DEFAULT_APPROVAL_TIMEOUT: Duration = Duration::from_secs(120);

/// The default for [`AppServerConfig::queue_cap`].
pub const DEFAULT_QUEUE_CAP: usize = 256;

/// Settings of the App Server face.
#[derive(Debug, Clone)]
pub struct AppServerConfig {
    /// `server.name` of the initialize result.
    pub server_name: String,
    /// `server.version`.
    pub server_version: String,
    /// Requests read and not yet answered; one more is answered `-32001` (overloaded, with
    /// `data.retry_after_ms`).
    pub queue_cap: usize,
    /// How long an `approval/decide` request waits for the host before it counts as a
    /// decline.
    pub approval_timeout: Duration,
    /// The working directory an approval's binding names.
    pub cwd: String,
    /// How long `turn/start` and `turn/interrupt` wait for the connection to write the turn's
    /// start or end before they answer without it ([`DEFAULT_SETTLE_LIMIT`]).
    pub settle_limit: Duration,
}

/// The default [`AppServerConfig::settle_limit`].
pub const DEFAULT_SETTLE_LIMIT: Duration = Duration::from_secs(30);

impl Default for AppServerConfig {
    fn default() -> Self {
        AppServerConfig {
            server_name: "agentwire".to_owned(),
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            queue_cap: DEFAULT_QUEUE_CAP,
            approval_timeout: DEFAULT_APPROVAL_TIMEOUT,
            cwd: std::env::current_dir()
                .map(|d| d.display().to_string())
                .unwrap_or_else(|_| "/".to_owned()),
            settle_limit: DEFAULT_SETTLE_LIMIT,
        }
    }
}

/// The App Server face of one runtime; each connection ([`serve`](Self::serve)) has its own
/// negotiation and followed threads, and the runtime's threads are shared by all.
#[derive(Debug)]
pub struct AppServerFace {
    runtime: Runtime,
    config: AppServerConfig,
}

impl AppServerFace {
    /// The face of `runtime`.
    pub fn new(runtime: Runtime, config: AppServerConfig) -> Arc<AppServerFace> {
        Arc::new(AppServerFace { runtime, config })
    }

    /// The runtime served.
    pub fn runtime(&self) -> &Runtime {
        &self.runtime
    }

    /// The JSON-RPC profile of a connection: the App Server profile (8 MiB inbound lines,
    /// 64 KiB outbound lines, no `id: null`, no batches) with the request queue's cap, over
    /// which a request is answered `-32001` with `data.retry_after_ms`.
    pub fn profile(&self) -> Profile {
        let profile = Profile::chainlesschain_app_server();
        let retry_after = u64::try_from(profile.retry_after.as_millis()).unwrap_or(u64::MAX);
        let overloaded = ErrorObject::new(-32001, "overloaded: too many requests in flight")
            .with_data(json!({"retry_after_ms": retry_after}));
        profile
            .with_max_inbound_requests(self.config.queue_cap.max(1))
            .with_overloaded_reply(overloaded)
    }

    /// Serves one connection until it closes (the host closed its side).
    pub async fn serve<R, W>(self: &Arc<Self>, reader: R, writer: W)
    where
        R: AsyncRead + Unpin + Send + 'static,
        W: AsyncWrite + Unpin + Send + 'static,
    {
        session::run(Arc::clone(self), reader, writer).await;
    }
}

#[cfg(test)]
mod tests {
    use tokio::io::AsyncWriteExt;

    use super::*;

    /// A finished connection's session is freed (it held the connection's peer, whose handlers
    /// held the session): after three connections, only the test holds the face.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn a_finished_connection_frees_its_session() {
        let (_dir, runtime) = crate::test_runtime().await;
        let face = AppServerFace::new(runtime, AppServerConfig::default());
        for _ in 0..3 {
            let (client, server) = tokio::io::duplex(1 << 16);
            let (server_read, server_write) = tokio::io::split(server);
            let (_client_read, mut client_write) = tokio::io::split(client);
            let serving = tokio::spawn({
                let face = Arc::clone(&face);
                async move { face.serve(server_read, server_write).await }
            });
            client_write
                .write_all(b"{\"jsonrpc\":\"2.0\",\"id\":1,\"method\":\"initialize\",\"params\":{\"protocolVersion\":1,\"minimumProtocolVersion\":1,\"client\":{\"name\":\"t\",\"version\":\"1\"}}}\n")
                .await
                .unwrap();
            client_write.shutdown().await.unwrap();
            drop(client_write);
            tokio::time::timeout(std::time::Duration::from_secs(10), serving)
                .await
                .unwrap()
                .unwrap();
        }
        let started = std::time::Instant::now();
        while Arc::strong_count(&face) > 1 {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the sessions of finished connections still hold the face ({})",
                Arc::strong_count(&face)
            );
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    }
}
