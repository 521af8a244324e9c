// A Node.js readline JSON-RPC 2.0 NDJSON peer, the way a TypeScript host or agent writes one.
//
// usage: node jsonrpc-peer.mjs   (speaks on stdin/stdout; exits at end of input)
//
// It answers `echo` with its params and `ask` by first asking the other side
// `host/double {"n": n}` and then answering `{"doubled": value}`. On the notification
// `start {"count": N}` it sends N concurrent `host/double` requests, checks every result, and
// reports `done {"ok": bool, "count": N}`. Unknown methods get -32601.
import readline from "node:readline";

const pending = new Map();
let counter = 0;

const send = (message) => process.stdout.write(JSON.stringify(message) + "\n");

function request(method, params) {
  counter += 1;
  const id = `node-${counter}`;
  return new Promise((resolve, reject) => {
    pending.set(id, { resolve, reject });
    send({ jsonrpc: "2.0", id, method, params });
  });
}

async function handle(message) {
  const { method, params } = message;
  if (!("id" in message)) {
    if (method === "start") {
      const results = await Promise.all(
        Array.from({ length: params.count }, (_, n) => request("host/double", { n })),
      );
      const ok = results.every((r, i) => r.value === 2 * i && Object.keys(r).length === 1);
      send({ jsonrpc: "2.0", method: "done", params: { ok, count: params.count } });
    }
    return;
  }
  if (method === "echo") {
    send({ jsonrpc: "2.0", id: message.id, result: params });
  } else if (method === "ask") {
    const answer = await request("host/double", { n: params.n });
    send({ jsonrpc: "2.0", id: message.id, result: { doubled: answer.value } });
  } else {
    send({ jsonrpc: "2.0", id: message.id, error: { code: -32601, message: `method not found: ${method}` } });
  }
}

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line.trim()) return;
  const message = JSON.parse(line);
  if ("method" in message) {
    handle(message).catch((error) => {
      console.error(error);
      process.exitCode = 1;
    });
  } else {
    const waiter = pending.get(message.id);
    pending.delete(message.id);
    if (message.error) waiter.reject(new Error(JSON.stringify(message.error)));
    else waiter.resolve(message.result);
  }
});
lines.on("close", () => process.exit(process.exitCode ?? 0));
