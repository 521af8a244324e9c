//! Roll Runtime Protocol v1 (wire versions 1.0 to 1.5): registries, negotiation, per-version
//! parse and projection, event cursors, user-input forms and approval previews. No I/O.

pub mod approval;
pub mod constants;
pub mod cursor;
pub mod errors;
/// Wire types of every version 1.0 to 1.5, generated from the canonical document
/// `protocols/roll-runtime/roll-runtime.schema.json` (`agentwire gen --all-versions`); [`types`]
/// names them for users.
#[path = "generated/rust/roll_runtime.rs"]
#[rustfmt::skip]
pub mod generated;
pub mod ids;
pub mod methods;
pub mod negotiation;
pub mod parse;
pub mod project;
mod registry;
pub mod schema;
pub mod types;
pub mod user_input;
pub mod version;

pub use cursor::{
    CursorError, CursorKey, EventCursor, compare_event_cursors, event_cursor_distance,
};
pub use errors::RollErrorCode;
pub use ids::{InteractionId, JsonRpcId, RequestId};
pub use methods::{MethodKind, MethodParams, MethodResult, RollHandler, RollMethod, request};
pub use version::{
    Capabilities, Feature, LATEST_VERSION, Method, ProtocolVersion, SUPPORTED_VERSIONS,
    ServerRequestMethod,
};
