//! Host-side clients of agent runtimes. [`roll`]: the Roll Runtime Protocol client (spawn or
//! connect, negotiate, typed calls, server requests, events, following threads, shutdown).
//! [`recovery`]: the Roll recovery manager it follows threads with, which turns what a runtime
//! sends across reconnects, replays and restarts into one gap-free, duplicate-free stream of
//! durable events per thread. [`proxy`]: a tap between a Roll host and a runtime that
//! forwards every frame unchanged, checks each against the negotiated version and records the
//! session.
//! [`conformance`]: a conformance suite that runs protocol scenarios against any Roll runtime
//! command and reports pass or fail per version.
//!
//! ```
//! use agentwire_client::{Action, Delivery, RecoveryConfig, StagedEvent, ThreadRecovery};
//! use agentwire_roll::cursor::EventCursor;
//!
//! let log = [7u8; 16];
//! let at = |seq: u64| EventCursor::new(log, seq, [seq as u8; 16]);
//! let mut thread: ThreadRecovery<String> =
//!     ThreadRecovery::new(RecoveryConfig::default(), Some(at(4)), Some("instance-a".into()));
//! assert_eq!(thread.connected("instance-a"), Action::Resume { after_cursor: Some(at(4)) });
//! // The replay of 5 and a live 6 arrive in either order, then the barrier.
//! thread.event(StagedEvent { cursor: at(6), bytes: 120, event: "live".into() });
//! thread.event(StagedEvent { cursor: at(5), bytes: 120, event: "replayed".into() });
//! thread.resumed(Some(&at(5)), 1).unwrap();
//! let shown: Vec<String> = thread
//!     .take_deliveries()
//!     .filter_map(|d| match d {
//!         Delivery::Event(e) => Some(e.event),
//!         Delivery::Reset { .. } => None,
//!     })
//!     .collect();
//! assert_eq!(shown, ["replayed", "live"]);
//! ```

pub mod conformance;
pub mod proxy;
pub mod recovery;
pub mod roll;

pub use recovery::{
    Action, Delivery, FallbackReason, RecoveryConfig, RecoveryError, StagedEvent, ThreadRecovery,
};
