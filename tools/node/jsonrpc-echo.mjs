// The benchmark's anchor: a minimal JSON-RPC 2.0 NDJSON echo peer, readline + JSON.parse +
// JSON.stringify, answering every request with its params as the result.
//
// usage: node jsonrpc-echo.mjs   (speaks on stdin/stdout; exits at end of input)
import readline from "node:readline";

const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
lines.on("line", (line) => {
  if (!line) return;
  const message = JSON.parse(line);
  if (message.id !== undefined && message.method !== undefined) {
    process.stdout.write(JSON.stringify({ jsonrpc: "2.0", id: message.id, result: message.params }) + "\n");
  }
});
