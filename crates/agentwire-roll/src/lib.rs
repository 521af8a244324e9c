//! Roll Runtime Protocol v1 (wire versions 1.0 to 1.5): registries, negotiation, per-version
//! parse and projection, event cursors, user-input forms and approval previews. No I/O.

pub mod approval;
pub mod constants;
pub mod cursor;
pub mod errors;
pub mod ids;
pub mod negotiation;
pub mod parse;
pub mod project;
pub mod schema;
pub mod types;
pub mod user_input;
pub mod version;

pub use cursor::{
    CursorError, CursorKey, EventCursor, compare_event_cursors, event_cursor_distance,
};
pub use errors::RollErrorCode;
pub use ids::{InteractionId, JsonRpcId, RequestId};
pub use version::{
    Capabilities, Feature, LATEST_VERSION, Method, ProtocolVersion, SUPPORTED_VERSIONS,
    ServerRequestMethod,
};
