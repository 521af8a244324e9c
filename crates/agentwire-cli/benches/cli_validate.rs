//! `agentwire validate --ndjson` through the binary, as a user runs it, against the same job
//! done with AJV 8 in node (`tools/node/validate-ndjson-ajv.mjs`): the same schema (OpenClaw's
//! published `protocol.schema.json`), the same NDJSON files, one message in ten invalid, the
//! report of the invalid ones printed. `scripts/bench.sh` runs it.
//!
//! Workloads: the root (frames of every kind) and ten definitions through `--def`, from the
//! smallest messages (`TickEvent`, a few dozen bytes) up. Each has 40 generated messages (every
//! tenth invalid) repeated to a file of 20,000 and one of 100,000 lines; the marginal rate,
//! 80,000 / (t(100,000) − t(20,000)), leaves out start-up (process, schema load and compile) on
//! both sides. Runs of the two sides alternate and the fastest of each is kept, so load from
//! other processes hits both alike; only the ratio of one run counts. Wall-clock time (what a
//! user waits) decides the targets (each definition ≥ 1× AJV, the ten together ≥ 3×, the root
//! ≥ 3×); CPU time (user + system, from GNU time) is printed beside it, being less moved by
//! other processes on a loaded machine.

// Benchmark helpers fail loudly on broken setup, like the tests they serve.
#![allow(clippy::unwrap_used, clippy::expect_used)]

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use agentwire_schema::SchemaDocument;
use agentwire_schema::fast::sample::{Generator, Rng, Size, mutate};
use agentwire_schema::fast::{FastSchema, Target};
use agentwire_testkit::{node_script, openclaw_schema_path, repo_root};
use serde_json::{Value, json};

/// Messages in the small and the large file.
const SIZES: [usize; 2] = [20_000, 100_000];
/// Distinct messages of a workload, repeated to fill the files.
const DISTINCT: usize = 40;
/// One message in this many is invalid.
const INVALID_EVERY: usize = 10;
/// Runs per side and size; the fastest counts.
const RUNS: usize = 3;
/// Target of each definition: the CLI's marginal rate at least this many times AJV's.
const TARGET_EACH: f64 = 1.0;
/// Target of the definitions together (their summed marginal times) and of the root.
const TARGET_ALL: f64 = 3.0;

/// One benchmark: a validation target and how its messages are made.
struct Workload {
    name: &'static str,
    /// `--def` of the command; `None` validates against the root.
    definition: Option<&'static str>,
    /// Builds one valid message.
    make: fn(&Generator<'_>, &SchemaDocument, &mut Rng) -> Value,
}

fn frame(generator: &Generator<'_>, doc: &SchemaDocument, rng: &mut Rng) -> Value {
    let part =
        |name: &str, rng: &mut Rng| generator.instance(&doc.definition_pointer(name).unwrap(), rng);
    let id = format!("r{}", rng.below(1 << 20));
    match rng.below(8) {
        0 => {
            json!({"type": "req", "id": id, "method": "connect", "params": part("ConnectParams", rng)})
        }
        1 => {
            json!({"type": "req", "id": id, "method": "chat.send", "params": part("ChatSendParams", rng)})
        }
        2 => json!({"type": "req", "id": id, "method": "health"}),
        3 => json!({"type": "res", "id": id, "ok": true, "payload": part("HelloOk", rng)}),
        4 => {
            json!({"type": "event", "event": "tick", "payload": part("TickEvent", rng), "seq": rng.below(1 << 20)})
        }
        5 => {
            json!({"type": "event", "event": "agent", "payload": part("AgentEvent", rng), "seq": rng.below(1 << 20)})
        }
        _ => {
            json!({"type": "event", "event": "chat", "payload": part("ChatEvent", rng), "seq": rng.below(1 << 20)})
        }
    }
}

fn definition(generator: &Generator<'_>, doc: &SchemaDocument, rng: &mut Rng, name: &str) -> Value {
    generator.instance(&doc.definition_pointer(name).unwrap(), rng)
}

/// A workload of one definition through `--def`.
macro_rules! definition {
    ($name:literal, $def:literal) => {
        Workload {
            name: $name,
            definition: Some($def),
            make: |g, d, r| definition(g, d, r, $def),
        }
    };
}

const WORKLOADS: &[Workload] = &[
    Workload {
        name: "openclaw-frames",
        definition: None,
        make: frame,
    },
    definition!("tick-event", "TickEvent"),
    definition!("shutdown-event", "ShutdownEvent"),
    definition!("error-shape", "ErrorShape"),
    definition!("request-frame", "RequestFrame"),
    definition!("response-frame", "ResponseFrame"),
    definition!("event-frame", "EventFrame"),
    definition!("agent-event", "AgentEvent"),
    definition!("chat-event", "ChatEvent"),
    definition!("chat-history-params", "ChatHistoryParams"),
    definition!("connect-params", "ConnectParams"),
];

/// Byte range of a generated message: the frames of a live session, not bulk transfers.
const MESSAGE_BYTES: (usize, usize) = (2, 4_000);

/// Attempts at breaking a message in one place before it is cut in half instead.
const MUTATION_ATTEMPTS: usize = 1_000;

/// The distinct lines of a workload, every tenth one invalid.
fn messages(w: &Workload, doc: &SchemaDocument, fast: &FastSchema) -> Vec<String> {
    let generator = Generator::new(doc, Size::Small);
    let target: Target = match w.definition {
        Some(name) => fast.definition(name).unwrap(),
        None => fast.root(),
    };
    let mut rng = Rng::new(0x5eed_0c11);
    let mut lines = Vec::with_capacity(DISTINCT);
    while lines.len() < DISTINCT {
        let message = (w.make)(&generator, doc, &mut rng);
        let text = serde_json::to_string(&message).unwrap();
        if text.len() < MESSAGE_BYTES.0 || text.len() > MESSAGE_BYTES.1 {
            continue;
        }
        if !fast.is_valid(target, &message) {
            continue;
        }
        if (lines.len() + 1) % INVALID_EVERY != 0 {
            lines.push(text);
            continue;
        }
        // The second invalid message is cut short, as by a writer that died; the others are
        // broken in one place by the sampler until the schema rejects them.
        let broken = if lines.len() + 1 == INVALID_EVERY * 2 {
            None
        } else {
            (0..MUTATION_ATTEMPTS)
                .map(|_| mutate(&message, &mut rng))
                .find(|candidate| !fast.is_valid(target, candidate))
        };
        match broken {
            Some(broken) => lines.push(serde_json::to_string(&broken).unwrap()),
            None => {
                let mut cut = text.len() / 2;
                while !text.is_char_boundary(cut) {
                    cut -= 1;
                }
                lines.push(text[..cut].to_owned());
            }
        }
    }
    lines
}

fn scratch() -> PathBuf {
    let dir = repo_root().join("target/bench-cli");
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Where GNU time (Debian package `time`) is; it reports a child's CPU time, which std does not.
const GNU_TIME: &str = "/usr/bin/time";

/// One run: wall-clock and CPU (user + system) seconds, and the summary line it printed.
struct Timing {
    wall: f64,
    cpu: f64,
    summary: String,
}

fn time(command: Command, expect_lines: usize) -> Timing {
    let out_path = scratch().join("report.txt");
    let time_path = scratch().join("time.txt");
    let out = std::fs::File::create(&out_path).unwrap();
    if !Path::new(GNU_TIME).is_file() {
        panic!("{GNU_TIME} is missing: install the Debian package `time`");
    }
    let mut timed = Command::new(GNU_TIME);
    timed
        .arg("-f")
        .arg("%e %U %S")
        .arg("-o")
        .arg(&time_path)
        .arg(command.get_program())
        .args(command.get_args())
        .stdout(out)
        .stderr(Stdio::inherit());
    for (key, value) in command.get_envs() {
        match value {
            Some(value) => timed.env(key, value),
            None => timed.env_remove(key),
        };
    }
    // Wall time from here, to the nanosecond: GNU time's is in hundredths of a second, coarser
    // than the marginal time of the smallest messages.
    let start = std::time::Instant::now();
    let status = timed.status().unwrap();
    let wall = start.elapsed().as_secs_f64();
    assert_eq!(status.code(), Some(1), "{command:?}");
    let report = std::fs::read_to_string(&out_path).unwrap();
    let summary = report.lines().last().unwrap_or_default().to_owned();
    assert!(
        summary.starts_with(&format!("{expect_lines} messages: ")),
        "{command:?}: {summary}"
    );
    let times = std::fs::read_to_string(&time_path).unwrap();
    let fields: Vec<f64> = times
        .lines()
        .last()
        .unwrap_or_default()
        .split_whitespace()
        .map(|f| f.parse().unwrap())
        .collect();
    Timing {
        wall,
        cpu: fields[1] + fields[2],
        summary,
    }
}

fn agentwire(schema: &Path, w: &Workload, file: &Path) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_agentwire"));
    command.arg("validate").arg("--schema").arg(schema);
    if let Some(def) = w.definition {
        command.args(["--def", def]);
    }
    command.arg("--ndjson").arg(file);
    command
}

fn ajv(schema: &Path, w: &Workload, file: &Path) -> Command {
    let mut command = node_script("validate-ndjson-ajv.mjs");
    command
        .arg(schema)
        .arg(w.definition.unwrap_or("-"))
        .arg(file);
    command
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let runs = if args.iter().any(|a| a == "--quick") {
        1
    } else {
        RUNS
    };
    let only = args
        .iter()
        .position(|a| a == "--only")
        .and_then(|i| args.get(i + 1));
    let schema = openclaw_schema_path();
    let doc = SchemaDocument::open(&schema).unwrap();
    let fast = FastSchema::compile(&doc).unwrap();
    println!("agentwire validate --ndjson against AJV 8 (node), OpenClaw protocol.schema.json");
    println!(
        "{:<22} {:>9} {:>12} {:>12} {:>12} {:>12} {:>8}",
        "workload", "bytes/msg", "cli 20k s", "cli 100k s", "cli msg/s", "ajv msg/s", "ratio"
    );
    let mut missed = false;
    // Marginal wall seconds of the definitions, summed: agentwire, AJV, workloads.
    let mut together = (0.0, 0.0, 0);
    for w in WORKLOADS {
        if only.is_some_and(|o| !w.name.contains(o.as_str())) {
            continue;
        }
        let distinct = messages(w, &doc, &fast);
        let mean = distinct.iter().map(String::len).sum::<usize>() / distinct.len();
        let files: Vec<PathBuf> = SIZES
            .iter()
            .map(|&n| {
                let path = scratch().join(format!("{}-{n}.ndjson", w.name));
                let mut text = String::new();
                for line in distinct.iter().cycle().take(n) {
                    text.push_str(line);
                    text.push('\n');
                }
                std::fs::write(&path, text).unwrap();
                path
            })
            .collect();
        // best[side][size] = (wall, cpu); side 0 is agentwire, 1 is AJV.
        let mut best = [[(f64::INFINITY, f64::INFINITY); 2]; 2];
        let mut summaries = [String::new(), String::new()];
        for _ in 0..runs {
            for (size, file) in files.iter().enumerate() {
                let commands = [agentwire(&schema, w, file), ajv(&schema, w, file)];
                for (side, command) in commands.into_iter().enumerate() {
                    let t = time(command, SIZES[size]);
                    let slot = &mut best[side][size];
                    *slot = (slot.0.min(t.wall), slot.1.min(t.cpu));
                    summaries[side] = t.summary;
                }
            }
        }
        // GNU time reports CPU time in hundredths of a second; wall time is to the nanosecond.
        let marginal = |side: usize, cpu: bool| {
            let pick = |size: usize| {
                let (wall, cpu_time) = best[side][size];
                if cpu { cpu_time } else { wall }
            };
            let floor = if cpu { 0.01 } else { 0.001 };
            (SIZES[1] - SIZES[0]) as f64 / (pick(1) - pick(0)).max(floor)
        };
        let (cli, node) = (marginal(0, false), marginal(1, false));
        let ratio = cli / node;
        let (cli_cpu, node_cpu) = (marginal(0, true), marginal(1, true));
        let target = if w.definition.is_some() {
            together.0 += (SIZES[1] - SIZES[0]) as f64 / cli;
            together.1 += (SIZES[1] - SIZES[0]) as f64 / node;
            together.2 += 1;
            TARGET_EACH
        } else {
            TARGET_ALL
        };
        missed |= ratio < target;
        println!(
            "{:<22} {:>9} {:>12.3} {:>12.3} {:>12.0} {:>12.0} {:>7.2}× {}",
            w.name,
            mean,
            best[0][0].0,
            best[0][1].0,
            cli,
            node,
            ratio,
            if ratio >= target { "met" } else { "MISSED" }
        );
        println!(
            "    CPU time (user + system): agentwire {:.2} s / {:.2} s, ajv {:.2} s / {:.2} s: marginal {cli_cpu:.0} against {node_cpu:.0} msg/s, {:.2}×",
            best[0][0].1,
            best[0][1].1,
            best[1][0].1,
            best[1][1].1,
            cli_cpu / node_cpu
        );
        println!("    agentwire: {}", summaries[0]);
        println!(
            "    ajv:       {} ({})",
            summaries[1],
            if summaries[0] == summaries[1] {
                "same verdict counts"
            } else {
                "verdict counts DIFFER"
            }
        );
        println!(
            "    start-up (20k time − 20k at the marginal rate): agentwire {:.2} s, ajv {:.2} s",
            best[0][0].0 - SIZES[0] as f64 / cli,
            best[1][0].0 - SIZES[0] as f64 / node
        );
    }
    if together.2 > 0 {
        let ratio = together.1 / together.0;
        missed |= ratio < TARGET_ALL;
        println!(
            "{} definitions together: agentwire {:.3} s, ajv {:.3} s marginal: {ratio:.2}× {}",
            together.2,
            together.0,
            together.1,
            if ratio >= TARGET_ALL { "met" } else { "MISSED" }
        );
    }
    println!(
        "targets: each definition ≥ {TARGET_EACH}×, the definitions together and the root ≥ {TARGET_ALL}× AJV: {}",
        if missed { "MISSED" } else { "met" }
    );
}
