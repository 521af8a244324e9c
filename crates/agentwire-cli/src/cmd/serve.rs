//! `agentwire serve`: the reference runtime serving the Roll Runtime Protocol 1.0 to 1.5 on
//! standard input and output (`--stdio`) and on a Unix socket (`--roll-socket PATH`, any number
//! of hosts at once), or the ChainlessChain App Server on standard input and output
//! (`--app-server`, as the ChainlessChain SDKs spawn it), one runtime core behind them all.
//! Standard output carries protocol frames only; logs go to standard error (`AGENTWIRE_LOG`
//! sets the filter, default `info`; `warn` under `--app-server`).

use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use agentwire_agent_process::{AgentProcess, AgentProcessConfig};
use agentwire_runtime::{
    Agent, AttachmentLimits, AttachmentStore, DemoAgent, Runtime, RuntimeConfig, SystemClock,
};
use agentwire_serve::{
    AppServerConfig, AppServerFace, GatewayConfig, GatewayFace, RollFace, RollFaceConfig,
    SessionEnd,
};
use anyhow::Context;

use crate::cmd::Usage;
use crate::output::Format;

#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Serve one connection on standard input and output; the runtime stops when it ends.
    #[arg(long)]
    stdio: bool,
    /// Serve the Roll Runtime Protocol on a Unix socket at PATH, to any number of hosts at once
    /// (one session each). Without `--stdio`, the runtime serves until SIGINT or SIGTERM.
    #[arg(long, value_name = "PATH")]
    roll_socket: Option<PathBuf>,
    /// Serve the ChainlessChain App Server on standard input and output (docs/app-server.md);
    /// the runtime stops when the host closes standard input.
    #[arg(long, conflicts_with = "stdio")]
    app_server: bool,
    /// The App Server SDK's storage choice: either maps onto the runtime's event log.
    #[arg(long, value_name = "KIND", value_parser = ["jsonl", "sqlite"])]
    app_server_store: Option<String>,
    /// The App Server SDK's state directory: the log is `DIR/runtime.sqlite`.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["app_server_state_path", "store"])]
    app_server_state_dir: Option<PathBuf>,
    /// The App Server SDK's state file: the log is the SQLite file PATH.
    #[arg(long, value_name = "PATH", conflicts_with = "store")]
    app_server_state_path: Option<PathBuf>,
    /// Requests of the App Server host read and not yet answered; one more is answered
    /// `-32001` with `data.retry_after_ms` [default: 256].
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u64).range(1..=65_536))]
    app_server_queue_cap: Option<u64>,
    /// How long an App Server `approval/decide` request waits for the host, in seconds; no
    /// answer by then is a decline [default: 120].
    #[arg(long, value_name = "SECONDS", value_parser = clap::value_parser!(u64).range(1..=86_400))]
    approval_timeout: Option<u64>,
    /// Serve the OpenClaw gateway on WebSocket at ADDR (docs/gateway.md), e.g.
    /// `127.0.0.1:18789`; a non-loopback address needs `--token`. Without `--stdio`, the
    /// runtime serves until SIGINT or SIGTERM.
    #[arg(long, value_name = "ADDR")]
    listen: Option<std::net::SocketAddr>,
    /// The gateway's shared token: a client presents it as `auth.token` in `connect` and gets
    /// the scopes it asks for. Without one, loopback clients are read-only operators.
    #[arg(long, value_name = "TOKEN", requires = "listen")]
    token: Option<String>,
    /// How often the gateway sends `tick`, in milliseconds [default: 30000].
    #[arg(long, value_name = "N", requires = "listen", value_parser = clap::value_parser!(u64).range(1..=3_600_000))]
    tick_interval_ms: Option<u64>,
    /// Bytes a gateway connection's outbound queue holds (`policy.maxBufferedBytes`); past it a
    /// droppable event is skipped and anything else closes the connection 1008 "slow consumer"
    /// [default: 52428800].
    #[arg(long, value_name = "BYTES", requires = "listen", value_parser = clap::value_parser!(u64).range(1024..=1_073_741_824))]
    max_buffered_bytes: Option<u64>,
    /// The durable event log: `sqlite:PATH` or `postgres://…` (default:
    /// `sqlite:<state dir>/runtime.sqlite`, see `state_dir`).
    #[arg(long, value_name = "URL")]
    store: Option<String>,
    #[command(flatten)]
    runtime: RuntimeArgs,
}

impl Args {
    /// The store: `--store`, else the App Server's state path or directory, else the default.
    fn store_url(&self) -> anyhow::Result<String> {
        if let Some(path) = &self.app_server_state_path {
            if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                std::fs::create_dir_all(parent).with_context(|| {
                    format!("cannot create the state directory {}", parent.display())
                })?;
            }
            return Ok(format!("sqlite:{}", path.display()));
        }
        if let Some(dir) = &self.app_server_state_dir {
            std::fs::create_dir_all(dir)
                .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
            return Ok(format!("sqlite:{}", dir.join("runtime.sqlite").display()));
        }
        store_url(self.store.clone())
    }
}

/// What the runtime runs and its limits (shared by `serve` and `demo`).
#[derive(Debug, Clone, clap::Args)]
pub(crate) struct RuntimeArgs {
    /// The built-in agent: `demo`, the scripted agent of docs/agent.md.
    #[arg(long, value_name = "NAME", default_value = "demo", value_parser = ["demo"])]
    pub(crate) agent: String,
    /// Run this command for every turn instead, speaking the agent protocol on its standard
    /// input and output (docs/agent.md); split like a shell would, but run without one.
    #[arg(long, value_name = "'CMD ARGS'")]
    pub(crate) agent_cmd: Option<String>,
    /// How long an agent process may work on a turn, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 600,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) turn_timeout: u64,
    /// The largest inbound frame in bytes (`limits.maxFrameBytes`).
    #[arg(long, value_name = "BYTES", default_value_t = 4 * 1024 * 1024,
          value_parser = clap::value_parser!(u64).range(1024..=64 * 1024 * 1024))]
    pub(crate) max_frame_bytes: u64,
    /// The largest page a client may ask for (`limits.maxPageSize`).
    #[arg(long, value_name = "N", default_value_t = 500,
          value_parser = clap::value_parser!(u64).range(1..=10_000))]
    pub(crate) max_page_size: u64,
    /// Completed mutations kept for idempotent retries (`limits.idempotencyCacheEntries`).
    #[arg(long, value_name = "N", default_value_t = 10_000,
          value_parser = clap::value_parser!(u64).range(1..=1_000_000))]
    pub(crate) idempotency_entries: u64,
    /// How long an approval or user-input request waits for the host, in seconds.
    #[arg(long, value_name = "SECONDS", default_value_t = 300,
          value_parser = clap::value_parser!(u64).range(1..=86_400))]
    pub(crate) interaction_timeout: u64,
}

impl RuntimeArgs {
    pub(crate) fn agent(&self) -> anyhow::Result<Arc<dyn Agent>> {
        let Some(command) = &self.agent_cmd else {
            return Ok(Arc::new(DemoAgent::default()));
        };
        let mut config = AgentProcessConfig::from_command_line(command)
            .map_err(|e| Usage::new("usage.agent-cmd", e.to_string()))?;
        config.turn_timeout = Duration::from_secs(self.turn_timeout);
        let agent =
            AgentProcess::new(config).map_err(|e| Usage::new("usage.agent-cmd", e.to_string()))?;
        Ok(Arc::new(agent))
    }

    /// Opens the log at `url`, starts the runtime on it and builds its Roll face (with the
    /// attachment store beside the log).
    pub(crate) async fn start(
        &self,
        url: &str,
    ) -> anyhow::Result<(Arc<dyn agentwire_events::EventLog>, Arc<RollFace>)> {
        let log = agentwire_events::open(url).await.with_context(|| {
            format!(
                "cannot open the event log {}",
                agentwire_events::redact_store_url(url)
            )
        })?;
        let core = Runtime::start(
            Arc::clone(&log),
            self.agent()?,
            Arc::new(SystemClock),
            self.runtime_config(),
        )
        .await
        .context("cannot start the runtime")?;
        let spool = attachment_dir(url)?;
        let attachments = AttachmentStore::new(&spool, AttachmentLimits::default())
            .with_context(|| format!("cannot use {} for attachments", spool.display()))?;
        let mut config = self.face_config();
        config.attachments = Some(attachments);
        Ok((log, RollFace::new(core, config)))
    }

    /// The agent's name for `thread.capabilities`.
    fn agent_name(&self) -> String {
        match &self.agent_cmd {
            Some(command) => command.clone(),
            None => self.agent.clone(),
        }
    }

    pub(crate) fn runtime_config(&self) -> RuntimeConfig {
        RuntimeConfig {
            interaction_ttl: Duration::from_secs(self.interaction_timeout),
            idempotency_entries: usize::try_from(self.idempotency_entries).unwrap_or(usize::MAX),
            ..RuntimeConfig::default()
        }
    }

    pub(crate) fn face_config(&self) -> RollFaceConfig {
        RollFaceConfig {
            max_frame_bytes: self.max_frame_bytes,
            max_page_size: self.max_page_size,
            server_version: env!("CARGO_PKG_VERSION").to_owned(),
            runtime_version: env!("CARGO_PKG_VERSION").to_owned(),
            manifest: serde_json::json!({"agent": self.agent_name()}),
            ..RollFaceConfig::default()
        }
    }
}

/// The runtime's state directory: `$AGENTWIRE_STATE_DIR`, else `$XDG_STATE_HOME/agentwire`,
/// else `$HOME/.local/state/agentwire`.
pub(crate) fn state_dir() -> anyhow::Result<PathBuf> {
    if let Some(dir) = std::env::var_os("AGENTWIRE_STATE_DIR").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir));
    }
    if let Some(dir) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return Ok(PathBuf::from(dir).join("agentwire"));
    }
    let home = std::env::var_os("HOME")
        .filter(|d| !d.is_empty())
        .context("no state directory: set AGENTWIRE_STATE_DIR, XDG_STATE_HOME or HOME")?;
    Ok(PathBuf::from(home).join(".local/state/agentwire"))
}

/// The store URL given, or the default SQLite file in the state directory (created).
pub(crate) fn store_url(store: Option<String>) -> anyhow::Result<String> {
    if let Some(url) = store {
        return Ok(url);
    }
    let dir = state_dir()?;
    std::fs::create_dir_all(&dir)
        .with_context(|| format!("cannot create the state directory {}", dir.display()))?;
    Ok(format!("sqlite:{}", dir.join("runtime.sqlite").display()))
}

/// Where attachments are spooled: `attachments/` beside an SQLite store, else in the state
/// directory.
pub(crate) fn attachment_dir(url: &str) -> anyhow::Result<PathBuf> {
    if let Ok(agentwire_events::StoreUrl::Sqlite(path)) = agentwire_events::StoreUrl::parse(url)
        && let Some(parent) = path.parent()
    {
        let parent = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        return Ok(parent.join("attachments"));
    }
    Ok(state_dir()?.join("attachments"))
}

/// Logs to standard error, never to a protocol stdout.
pub(crate) fn init_logging(default: &str) {
    let filter = tracing_subscriber::EnvFilter::try_from_env("AGENTWIRE_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new(default));
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .try_init();
}

/// Hosts served on the Unix socket at once; a host beyond them is closed at once (logged).
pub(crate) const MAX_SOCKET_CONNECTIONS: usize = 256;

pub(crate) fn run(args: Args, _format: Format, _out: &mut dyn Write) -> anyhow::Result<u8> {
    if !args.stdio && !args.app_server && args.roll_socket.is_none() && args.listen.is_none() {
        return Err(Usage::new(
            "usage.serve-transport",
            "choose a transport: --stdio (one connection on standard input and output), --app-server (the ChainlessChain App Server on standard input and output), --roll-socket PATH (any number of hosts on a Unix socket) and/or --listen ADDR (the OpenClaw gateway on WebSocket)",
        )
        .into());
    }
    if let Some(addr) = args.listen
        && !addr.ip().is_loopback()
        && args.token.is_none()
    {
        return Err(Usage::new(
            "usage.serve-listen-token",
            format!("--listen {addr} is not a loopback address: it needs --token"),
        )
        .into());
    }
    // The App Server SDK keeps only the tail of standard error; informational lines are left
    // out unless AGENTWIRE_LOG asks for them.
    let app_server_options = args.app_server_store.is_some()
        || args.app_server_state_dir.is_some()
        || args.app_server_state_path.is_some()
        || args.app_server_queue_cap.is_some()
        || args.approval_timeout.is_some();
    if app_server_options && !args.app_server {
        return Err(Usage::new(
            "usage.serve-app-server-option",
            "the --app-server-* options and --approval-timeout need --app-server",
        )
        .into());
    }
    init_logging(if args.app_server { "warn" } else { "info" });
    if let Some(kind) = &args.app_server_store {
        tracing::debug!(%kind, "the App Server store choice maps onto the runtime's event log");
    }
    let url = args.store_url()?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    runtime.block_on(async move {
        let (log, face) = args.runtime.start(&url).await?;
        let listener = match &args.roll_socket {
            Some(path) => Some(SocketListener::bind(path)?),
            None => None,
        };
        tracing::info!(store = %agentwire_events::redact_store_url(&url), instance = %face.runtime().instance_id(), stdio = args.stdio, app_server = args.app_server, socket = ?args.roll_socket, "serving");
        let accepting = listener.map(|listener| tokio::spawn(listener.serve(Arc::clone(&face))));
        let gateway = match args.listen {
            Some(addr) => {
                let config = GatewayConfig {
                    token: args.token.clone(),
                    tick_interval: args
                        .tick_interval_ms
                        .map_or(agentwire_serve::gateway::DEFAULT_TICK_INTERVAL, Duration::from_millis),
                    max_buffered_bytes: args.max_buffered_bytes.map_or(
                        2 * agentwire_serve::gateway::DEFAULT_MAX_PAYLOAD,
                        |n| usize::try_from(n).unwrap_or(usize::MAX),
                    ),
                    ..GatewayConfig::default()
                };
                let (gateway, listener) =
                    GatewayFace::bind(face.runtime().clone(), addr, config).await?;
                tracing::info!(addr = %gateway.local_addr(), "the OpenClaw gateway listens");
                // The address actually bound (port 0 picks one), for whoever started us.
                eprintln!("agentwire: gateway listening on ws://{}", gateway.local_addr());
                let serving = tokio::spawn(Arc::clone(&gateway).serve(listener));
                Some((gateway, serving))
            }
            None => None,
        };
        if args.stdio {
            // Pipes are read and written through the event loop, not tokio's blocking threads.
            let (stdin, stdout) = agentwire_jsonrpc::transport::stdio();
            if face.serve(stdin, stdout).await == SessionEnd::UncorrelatedError {
                tracing::warn!("the connection ended after an uncorrelated error response");
            }
        } else if args.app_server {
            let app_server = AppServerFace::new(
                face.runtime().clone(),
                AppServerConfig {
                    queue_cap: args
                        .app_server_queue_cap
                        .map_or(agentwire_serve::app_server::DEFAULT_QUEUE_CAP, |n| {
                            usize::try_from(n).unwrap_or(usize::MAX)
                        }),
                    approval_timeout: args.approval_timeout.map_or(
                        agentwire_serve::app_server::DEFAULT_APPROVAL_TIMEOUT,
                        Duration::from_secs,
                    ),
                    ..AppServerConfig::default()
                },
            );
            let (stdin, stdout) = agentwire_jsonrpc::transport::stdio();
            app_server.serve(stdin, stdout).await;
        } else {
            stop_signal().await;
        }
        if let Some(accepting) = accepting {
            accepting.abort();
        }
        if let Some((gateway, serving)) = gateway {
            gateway.shutdown("the runtime is stopping");
            // A moment for the shutdown event and the closes to be written.
            tokio::time::sleep(Duration::from_millis(200)).await;
            serving.abort();
        }
        log.close().await.context("cannot close the event log")?;
        anyhow::Ok(0)
    })
}

/// Resolves at SIGINT or SIGTERM.
async fn stop_signal() {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::error!("cannot watch for SIGINT or SIGTERM; serving until killed");
        return std::future::pending().await;
    };
    tokio::select! {
        _ = interrupt.recv() => tracing::info!("SIGINT: stopping"),
        _ = terminate.recv() => tracing::info!("SIGTERM: stopping"),
    }
}

/// The Unix socket the Roll face listens on; the socket file is removed when it is dropped.
struct SocketListener {
    listener: tokio::net::UnixListener,
    path: PathBuf,
}

impl SocketListener {
    /// Binds `path`. A socket file left by a runtime that no longer listens is replaced; one
    /// that answers is in use, and so is any other kind of file.
    ///
    /// The socket is bound and listening under a name of its own in the same directory first,
    /// then linked to `path`: a host that waits for the file to appear never finds it before
    /// the runtime listens (a connection between `bind` and `listen` is refused), and of two
    /// runtimes starting on one path, the second is refused.
    fn bind(path: &Path) -> anyhow::Result<SocketListener> {
        use std::os::unix::fs::FileTypeExt as _;
        if let Ok(meta) = std::fs::symlink_metadata(path) {
            if !meta.file_type().is_socket() {
                anyhow::bail!("{} exists and is not a socket", path.display());
            }
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                anyhow::bail!("{} is in use: a runtime listens on it", path.display());
            }
            std::fs::remove_file(path)
                .with_context(|| format!("cannot replace the stale socket {}", path.display()))?;
        }
        let binding = path.with_file_name(format!(".agentwire-{}.sock", std::process::id()));
        // Left by a runtime of the same process id that was killed while binding.
        let _ = std::fs::remove_file(&binding);
        let listener = tokio::net::UnixListener::bind(&binding)
            .with_context(|| format!("cannot listen on {}", binding.display()))?;
        // A link, not a rename: a runtime that bound `path` meanwhile keeps it.
        let linked = std::fs::hard_link(&binding, path);
        let _ = std::fs::remove_file(&binding);
        match linked {
            Ok(()) => {}
            Err(error) if error.kind() == std::io::ErrorKind::AlreadyExists => {
                anyhow::bail!("{} is in use: another runtime bound it", path.display());
            }
            Err(error) => {
                return Err(error).with_context(|| {
                    format!(
                        "cannot link the socket {} to {}",
                        binding.display(),
                        path.display()
                    )
                });
            }
        }
        Ok(SocketListener {
            listener,
            path: path.to_owned(),
        })
    }

    /// Accepts hosts until aborted, each served as its own session.
    async fn serve(self, face: Arc<RollFace>) {
        let slots = Arc::new(tokio::sync::Semaphore::new(MAX_SOCKET_CONNECTIONS));
        loop {
            let stream = match self.listener.accept().await {
                Ok((stream, _)) => stream,
                Err(error) => {
                    // A transient failure (out of descriptors): the others go on being served.
                    tracing::warn!(%error, "cannot accept a connection");
                    tokio::time::sleep(Duration::from_millis(100)).await;
                    continue;
                }
            };
            let Ok(slot) = Arc::clone(&slots).try_acquire_owned() else {
                tracing::warn!(
                    limit = MAX_SOCKET_CONNECTIONS,
                    "too many hosts on the socket; closing the new one"
                );
                continue;
            };
            let (reader, writer) = stream.into_split();
            let face = Arc::clone(&face);
            tokio::spawn(async move {
                tracing::info!("a host connected on the socket");
                let end = face.serve(reader, writer).await;
                tracing::info!(?end, "a host's session on the socket ended");
                drop(slot);
            });
        }
    }
}

impl Drop for SocketListener {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}
