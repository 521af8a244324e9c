// The AJV side of the validation benchmark: the same schema and messages as the Rust side,
// measured in the same way, one JSON result on stdout.
//
// usage: node bench-ajv.mjs <workload.json> <min-seconds>
//        node bench-ajv.mjs --huge <schema.json> <definition|-> <message.json>
//        node bench-ajv.mjs --compile-all <schema.json>
//        node bench-ajv.mjs --serve <workload.json>
//
// A workload file is {"schema": path, "messages": [text…], "checks": [[[pointer, target]…]…]}:
// each message is checked at each JSON Pointer against a target (a definition name, or "" for
// the root), exactly as the Rust side checks it. Output:
// {"compile_ms", "parse_validate_per_s", "validate_per_s", "valid"} — throughput is the best of
// three timed rounds, each at least <min-seconds> long. With --huge, one message is read, then
// parsed and validated once: {"parse_ms", "validate_ms", "valid", "max_rss_kib"}. With
// --compile-all, the schema text is parsed and its root and every definition compiled:
// {"compile_ms", "definitions"}. With --serve, the workload is loaded once and each line read
// from stdin (`pv <seconds>` or `v <seconds>`) runs one timed round of parse+validate or
// validate-only and answers {"rate"}, so the caller can interleave its own rounds with AJV's.
import fs from "node:fs";
import readline from "node:readline";
import { performance } from "node:perf_hooks";
import { requireToolDefault } from "./lib/modules.mjs";

const DRAFTS = new Map([
  ["http://json-schema.org/draft-07/schema", "ajv"],
  ["https://json-schema.org/draft/2019-09/schema", "ajv/dist/2019"],
  ["https://json-schema.org/draft/2020-12/schema", "ajv/dist/2020"],
]);

function fail(message) {
  process.stderr.write(`bench-ajv: ${message}\n`);
  process.exit(2);
}

function newAjv(schema) {
  const draftUri = typeof schema.$schema === "string" ? schema.$schema.replace(/#$/, "") : "";
  const module = DRAFTS.get(draftUri);
  if (!module) fail(`unsupported $schema ${JSON.stringify(schema.$schema)}`);
  const Ajv = requireToolDefault(module);
  const addFormats = requireToolDefault("ajv-formats");
  const ajv = new Ajv({ strict: false, allErrors: false, logger: false });
  addFormats(ajv);
  return ajv;
}

/** Compiles the root and the named definitions of one document with one Ajv instance. */
function compileTargets(schema, targets) {
  const ajv = newAjv(schema);
  const keyword = schema.$defs !== undefined ? "$defs" : "definitions";
  const doc = { ...schema };
  const id = "agentwire:bench";
  doc.$id = id;
  ajv.addSchema(doc);
  const validators = new Map();
  for (const t of targets) {
    const ref = t === "" ? id : `${id}#/${keyword}/${t.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    const v = ajv.getSchema(ref);
    if (!v) fail(`cannot compile ${JSON.stringify(t)}`);
    validators.set(t, v);
  }
  return validators;
}

function at(value, pointer) {
  if (pointer === "") return value;
  let cur = value;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (cur === null || typeof cur !== "object") return undefined;
    cur = cur[token];
  }
  return cur;
}

function bestRate(minSeconds, count, round) {
  let best = 0;
  for (let r = 0; r < 3; r++) best = Math.max(best, oneRound(minSeconds, count, round));
  return best;
}

if (process.argv[2] === "--compile-all") {
  const text = fs.readFileSync(process.argv[3], "utf8");
  const t0 = performance.now();
  const schema = JSON.parse(text);
  const keyword = schema.$defs !== undefined ? "$defs" : "definitions";
  const names = Object.keys(schema[keyword] ?? {});
  compileTargets(schema, ["", ...names]);
  const compileMs = performance.now() - t0;
  process.stdout.write(JSON.stringify({ compile_ms: compileMs, definitions: names.length }) + "\n");
} else if (process.argv[2] === "--huge") {
  const [schemaPath, definition, messagePath] = process.argv.slice(3);
  const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
  const target = definition === "-" ? "" : definition;
  const validate = compileTargets(schema, [target]).get(target);
  const text = fs.readFileSync(messagePath, "utf8");
  const t0 = performance.now();
  const value = JSON.parse(text);
  const t1 = performance.now();
  const valid = validate(value);
  const t2 = performance.now();
  process.stdout.write(
    JSON.stringify({ parse_ms: t1 - t0, validate_ms: t2 - t1, valid, max_rss_kib: process.resourceUsage().maxRSS }) + "\n",
  );
} else if (process.argv[2] === "--serve") {
  const w = loadWorkload(process.argv[3]);
  process.stdout.write(JSON.stringify({ compile_ms: w.compileMs, valid: w.valid }) + "\n");
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  for await (const line of lines) {
    const [mode, seconds] = line.trim().split(/\s+/);
    const round = mode === "pv" ? w.parseValidate : w.validateOnly;
    const rate = oneRound(Number(seconds), w.messages.length, round);
    process.stdout.write(JSON.stringify({ rate, sink: w.sink() }) + "\n");
  }
} else {
  const [workloadPath, minSecondsText] = process.argv.slice(2);
  if (!workloadPath) fail("usage: node bench-ajv.mjs <workload.json> <min-seconds>");
  const minSeconds = Number(minSecondsText ?? "1");
  const w = loadWorkload(workloadPath);
  const parseValidate = bestRate(minSeconds, w.messages.length, w.parseValidate);
  const validateOnly = bestRate(minSeconds, w.messages.length, w.validateOnly);
  process.stdout.write(
    JSON.stringify({
      compile_ms: w.compileMs,
      parse_validate_per_s: parseValidate,
      validate_per_s: validateOnly,
      valid: w.valid,
      sink: w.sink(),
    }) + "\n",
  );
}

function oneRound(minSeconds, count, round) {
  let n = 0;
  const start = performance.now();
  let elapsed = 0;
  do {
    round();
    n += count;
    elapsed = (performance.now() - start) / 1000;
  } while (elapsed < minSeconds);
  return n / elapsed;
}

function loadWorkload(workloadPath) {
  const workload = JSON.parse(fs.readFileSync(workloadPath, "utf8"));
  const schemaText = fs.readFileSync(workload.schema, "utf8");
  const targets = [...new Set(workload.checks.flat().map(([, t]) => t))];
  const c0 = performance.now();
  const validators = compileTargets(JSON.parse(schemaText), targets);
  const compileMs = performance.now() - c0;
  const messages = workload.messages;
  const checks = workload.checks.map((list) => list.map(([p, t]) => [p, validators.get(t)]));
  const parsed = messages.map((m) => JSON.parse(m));
  let valid = 0;
  for (let i = 0; i < parsed.length; i++) {
    if (checks[i].every(([p, v]) => v(at(parsed[i], p)))) valid++;
  }
  let sink = 0;
  return {
    compileMs,
    messages,
    valid,
    sink: () => sink,
    parseValidate: () => {
      for (let i = 0; i < messages.length; i++) {
        const value = JSON.parse(messages[i]);
        const list = checks[i];
        let ok = true;
        for (let k = 0; k < list.length && ok; k++) ok = list[k][1](at(value, list[k][0]));
        if (ok) sink++;
      }
    },
    validateOnly: () => {
      for (let i = 0; i < parsed.length; i++) {
        const value = parsed[i];
        const list = checks[i];
        let ok = true;
        for (let k = 0; k < list.length && ok; k++) ok = list[k][1](at(value, list[k][0]));
        if (ok) sink++;
      }
    },
  };
}
