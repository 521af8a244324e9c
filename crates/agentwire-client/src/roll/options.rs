//! How a client is set up: the runtime to start and the client's limits and timeouts
//! ([`ClientOptions`]), what `initialize` offers ([`InitializeOptions`]) and what it agreed
//! ([`Initialized`]), and the shutdown timeouts ([`ShutdownTimeouts`]).

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

use agentwire_jsonrpc::ROLL_CLIENT_MAX_INBOUND_FRAME;
use agentwire_roll::types::{InitializeResult, PeerInfo};
use agentwire_roll::{ProtocolVersion, ServerRequestMethod};

use super::interaction::Interactions;

/// The official client's request timeout (30 s).
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(30);
/// The pause before the one retry of a retryable read (100 ms).
pub const DEFAULT_READ_RETRY_DELAY: Duration = Duration::from_millis(100);
/// Bound of the [`crate::roll::RollClient::events`] queue.
pub const DEFAULT_EVENT_QUEUE: usize = 1024;

/// How long each step of the shutdown waits for the runtime to exit.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShutdownTimeouts {
    /// After closing its stdin (30 s).
    pub stdin: Duration,
    /// After `SIGTERM` (10 s).
    pub terminate: Duration,
    /// After `SIGKILL` (5 s).
    pub kill: Duration,
}

impl Default for ShutdownTimeouts {
    fn default() -> Self {
        ShutdownTimeouts {
            stdin: Duration::from_secs(30),
            terminate: Duration::from_secs(10),
            kill: Duration::from_secs(5),
        }
    }
}

/// The runtime to run and how to talk to it. [`crate::roll::RollClient::connect`] ignores
/// `program`, `args`, `env` and `current_dir`.
#[derive(Debug, Clone)]
pub struct ClientOptions {
    /// The runtime's executable, e.g. `agentwire` (with `args` `["serve", "--stdio"]`).
    pub program: OsString,
    /// Its arguments.
    pub args: Vec<OsString>,
    /// Variables added to its environment.
    pub env: Vec<(OsString, OsString)>,
    /// Its working directory (default: this process's).
    pub current_dir: Option<PathBuf>,
    /// The local frame budget in bytes (17 MiB): the longest line read from the runtime, and the
    /// outbound limit before it is lowered to `limits.maxFrameBytes`. Below 17 MiB, 1.3 and newer
    /// are not advertised.
    pub max_frame_bytes: usize,
    /// Timeout of each call to the runtime (30 s; `None`: none). Server requests to the client
    /// (human interactions) have none.
    pub request_timeout: Option<Duration>,
    /// Pause before the one retry of a retryable read (100 ms).
    pub read_retry_delay: Duration,
    /// Bound of the event queue (1024 items).
    pub event_queue: usize,
    /// The server-request handlers registered before `initialize`.
    pub interactions: Interactions,
    /// The shutdown timeouts.
    pub shutdown: ShutdownTimeouts,
}

impl ClientOptions {
    /// Options to run `program` with the defaults of the official client.
    pub fn new(program: impl Into<OsString>) -> ClientOptions {
        ClientOptions {
            program: program.into(),
            ..ClientOptions::default()
        }
    }

    /// Adds an argument.
    #[must_use]
    pub fn arg(mut self, arg: impl Into<OsString>) -> ClientOptions {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    #[must_use]
    pub fn args<I, S>(mut self, args: I) -> ClientOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<OsString>,
    {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds an environment variable.
    #[must_use]
    pub fn env(mut self, key: impl Into<OsString>, value: impl Into<OsString>) -> ClientOptions {
        self.env.push((key.into(), value.into()));
        self
    }

    /// Sets the server-request handlers.
    #[must_use]
    pub fn interactions(mut self, interactions: Interactions) -> ClientOptions {
        self.interactions = interactions;
        self
    }

    /// Sets the request timeout.
    #[must_use]
    pub fn request_timeout(mut self, timeout: Option<Duration>) -> ClientOptions {
        self.request_timeout = timeout;
        self
    }

    /// Sets the local frame budget.
    #[must_use]
    pub fn max_frame_bytes(mut self, bytes: usize) -> ClientOptions {
        self.max_frame_bytes = bytes;
        self
    }

    /// Sets the shutdown timeouts.
    #[must_use]
    pub fn shutdown(mut self, timeouts: ShutdownTimeouts) -> ClientOptions {
        self.shutdown = timeouts;
        self
    }
}

impl Default for ClientOptions {
    fn default() -> Self {
        ClientOptions {
            program: OsString::new(),
            args: Vec::new(),
            env: Vec::new(),
            current_dir: None,
            max_frame_bytes: ROLL_CLIENT_MAX_INBOUND_FRAME,
            request_timeout: Some(DEFAULT_REQUEST_TIMEOUT),
            read_retry_delay: DEFAULT_READ_RETRY_DELAY,
            event_queue: DEFAULT_EVENT_QUEUE,
            interactions: Interactions::new(),
            shutdown: ShutdownTimeouts::default(),
        }
    }
}

/// What `initialize` offers.
#[derive(Debug, Clone, PartialEq)]
pub struct InitializeOptions {
    /// The `protocolVersions` to offer, in preference order. `None`: every supported version
    /// newest first that the local frame budget and the registered handlers allow
    /// (`negotiation::advertisable_versions`). An explicit list is checked the same way
    /// (`negotiation::check_advertisement`); entries this crate does not know are sent as they
    /// are.
    pub versions: Option<Vec<String>>,
    /// `client.name` and `client.version` (default `agentwire` and this crate's version).
    pub client: PeerInfo,
}

impl Default for InitializeOptions {
    fn default() -> Self {
        InitializeOptions {
            versions: None,
            client: PeerInfo {
                name: "agentwire".to_owned(),
                version: env!("CARGO_PKG_VERSION").to_owned(),
            },
        }
    }
}

impl InitializeOptions {
    /// Offers exactly `versions`.
    #[must_use]
    pub fn versions<I, S>(mut self, versions: I) -> InitializeOptions
    where
        I: IntoIterator<Item = S>,
        S: Into<String>,
    {
        self.versions = Some(versions.into_iter().map(Into::into).collect());
        self
    }
}

/// What `initialize` (and, on 1.2+, the capability handshake after it) agreed.
#[derive(Debug, Clone, PartialEq)]
pub struct Initialized {
    /// The negotiated version, fixed for the connection.
    pub version: ProtocolVersion,
    /// The full `initialize` result.
    pub result: InitializeResult,
    /// The `protocolVersions` that were offered.
    pub offered: Vec<String>,
    /// The server requests the runtime may send: the capability ACK on 1.2+, `approval.request`
    /// on 1.1, none on 1.0.
    pub accepted: BTreeSet<ServerRequestMethod>,
    /// The outbound frame limit from now on: `min(local budget, limits.maxFrameBytes)`.
    pub outbound_frame_limit: usize,
}
