//! Wire faces of the agentwire runtime core. Each face translates the core's threads, turns,
//! events and interactions into one wire protocol and back, and validates every inbound frame
//! before acting on it; the core knows no wire encoding. [`roll`] serves the Roll Runtime
//! Protocol 1.0 to 1.5 over JSON-RPC (stdio, or any byte stream); [`app_server`] the
//! ChainlessChain App Server over JSON-RPC on stdio; [`gateway`] the OpenClaw gateway over
//! WebSocket.

pub mod app_server;
mod checked;
pub mod gateway;
mod kept;
pub mod roll;

pub use app_server::{AppServerConfig, AppServerFace};
pub use gateway::{GatewayConfig, GatewayFace};
pub use roll::{RollFace, RollFaceConfig, SessionEnd};

/// A runtime of the demo agent on a fresh SQLite store in a temporary directory, which it keeps
/// (the faces' tests serve it).
#[cfg(test)]
pub(crate) async fn test_runtime() -> (tempfile::TempDir, agentwire_runtime::Runtime) {
    use std::sync::Arc;
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite:{}", dir.path().join("log.sqlite").display());
    let log = agentwire_events::open(&url).await.unwrap();
    let runtime = agentwire_runtime::Runtime::start(
        log,
        Arc::new(agentwire_runtime::DemoAgent::default()),
        Arc::new(agentwire_runtime::SystemClock),
        agentwire_runtime::RuntimeConfig::default(),
    )
    .await
    .unwrap();
    (dir, runtime)
}
