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
