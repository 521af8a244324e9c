"""Our OpenClaw gateway (`agentwire serve --listen`) against the real one (npm `openclaw`,
`openclaw gateway run`), side by side in one run: rounds alternate which server goes first, each
round starts both afresh, and every figure is the median over the rounds of that round's value.

Run it only inside a loopback namespace (scripts/bench.sh --gateway does:
tools/ns/loopback.sh). Both servers are measured by the same client, whose own cost is in both
sides' figures: the latencies by `RawClient`, a minimal WebSocket client on asyncio streams (the
`websockets` package's handshake alone costs about a millisecond of Python), the connections
held and the fan-out by `websockets`.

usage: python gateway_bench.py --agentwire BIN --node NODE --openclaw ENTRY --scratch DIR
                               [--rounds N] [--health N] [--connects N] [--idle N] [--fanout N]
"""

import argparse
import asyncio
import base64
import json
import os
import resource
import signal
import statistics
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Any, Callable, Optional

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

Json = Any
TOKEN = "bench-T0ken"
CLIENT = {"id": "cli", "displayName": "bench", "version": "dev", "platform": "python", "mode": "cli"}
READ = ["operator.read"]
WRITE = ["operator.read", "operator.write"]
READY_BUDGET_S = 60.0
# The real gateway serves 32 handshakes per address at once; both get the same concurrency.
HANDSHAKES_AT_ONCE = 16


@dataclass
class Server:
    name: str
    argv: list[str]
    port: int
    process: Optional["subprocess.Popen[bytes]"] = None


def rss_kib(pid: int) -> int:
    """VmRSS of `pid` and all its descendants, in KiB."""
    total = 0
    pending = [pid]
    while pending:
        current = pending.pop()
        try:
            with open(f"/proc/{current}/status") as status:
                for line in status:
                    if line.startswith("VmRSS:"):
                        total += int(line.split()[1])
            for task in os.listdir(f"/proc/{current}/task"):
                with open(f"/proc/{current}/task/{task}/children") as children:
                    pending.extend(int(c) for c in children.read().split())
        except (FileNotFoundError, ProcessLookupError):
            continue
    return total


class RawClient:
    """The least a WebSocket client does: the upgrade request, masked text frames out, unmasked
    frames in (no fragmentation, no extensions: neither server uses them here)."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer

    @classmethod
    async def open(cls, port: int) -> "RawClient":
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        key = base64.b64encode(os.urandom(16)).decode()
        writer.write((f"GET / HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nUpgrade: websocket\r\n"
                      f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                      "Sec-WebSocket-Version: 13\r\n\r\n").encode())
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 101"):
            writer.close()
            raise ConnectionError(head.split(b"\r\n", 1)[0].decode(errors="replace"))
        return cls(reader, writer)

    async def send(self, value: Json) -> None:
        payload = json.dumps(value).encode()
        n = len(payload)
        header = bytes([0x81, 0x80 | n]) if n < 126 else bytes([0x81, 0xFE]) + n.to_bytes(2, "big")
        assert n < 65536
        mask = os.urandom(4)
        masked = (int.from_bytes(payload, "big") ^ int.from_bytes((mask * (n // 4 + 1))[:n], "big")).to_bytes(n, "big")
        self.writer.write(header + mask + masked)

    async def recv(self) -> Json:
        while True:
            first, second = await self.reader.readexactly(2)
            n = second & 0x7F
            if n == 126:
                n = int.from_bytes(await self.reader.readexactly(2), "big")
            elif n == 127:
                n = int.from_bytes(await self.reader.readexactly(8), "big")
            payload = await self.reader.readexactly(n)
            opcode = first & 0x0F
            if opcode == 0x8:
                raise ConnectionError(f"closed: {payload[:2].hex()}")
            if opcode == 0x1:
                return json.loads(payload)

    async def connect(self, scopes: list[str]) -> Json:
        challenge = await self.recv()
        assert challenge.get("event") == "connect.challenge", challenge
        await self.send({"type": "req", "id": "c1", "method": "connect", "params": {
            "minProtocol": 4, "maxProtocol": 4, "client": CLIENT, "scopes": scopes, "auth": {"token": TOKEN}}})
        return await self.answer("c1")

    async def answer(self, rid: str) -> Json:
        while True:
            frame = await self.recv()
            if frame.get("type") == "res" and frame.get("id") == rid:
                return frame

    def close(self) -> None:
        self.writer.write(bytes([0x88, 0x82]) + b"\0\0\0\0" + (1000).to_bytes(2, "big"))
        self.writer.close()


async def recv_json(ws: ClientConnection, timeout: float = 30) -> Json:
    return json.loads(await asyncio.wait_for(ws.recv(), timeout))


async def handshake(port: int, scopes: list[str]) -> tuple[ClientConnection, Json]:
    """TCP, upgrade, challenge, connect; the connection and the connect answer."""
    ws = await websockets.connect(f"ws://127.0.0.1:{port}", max_size=None, compression=None)
    challenge = await recv_json(ws)
    assert challenge.get("event") == "connect.challenge", challenge
    await ws.send(json.dumps({"type": "req", "id": "c1", "method": "connect", "params": {
        "minProtocol": 4, "maxProtocol": 4, "client": CLIENT, "scopes": scopes, "auth": {"token": TOKEN}}}))
    while True:
        frame = await recv_json(ws)
        if frame.get("type") == "res" and frame.get("id") == "c1":
            return ws, frame


async def request(ws: ClientConnection, rid: str, method: str, params: Optional[Json] = None) -> Json:
    frame: Json = {"type": "req", "id": rid, "method": method}
    if params is not None:
        frame["params"] = params
    await ws.send(json.dumps(frame))
    while True:
        answer = await recv_json(ws)
        if answer.get("type") == "res" and answer.get("id") == rid:
            return answer


async def spawn_to_hello(server: Server, log: Any) -> float:
    """Starts the server and polls `connect` until hello-ok; seconds from spawn."""
    started = time.monotonic()
    server.process = subprocess.Popen(server.argv, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
    while time.monotonic() - started < READY_BUDGET_S:
        if server.process.poll() is not None:
            raise RuntimeError(f"{server.name} exited with {server.process.returncode}")
        try:
            ws, hello = await handshake(server.port, READ)
            await ws.close()
            if hello.get("ok") is True:
                return time.monotonic() - started
        except (OSError, ConnectionClosed, asyncio.TimeoutError, websockets.InvalidStatus):
            pass
        await asyncio.sleep(0.02)
    raise RuntimeError(f"{server.name} gave no hello-ok within {READY_BUDGET_S} s")


def percentile(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


async def health_round_trips(port: int, count: int) -> tuple[float, float]:
    client = await RawClient.open(port)
    hello = await client.connect(READ)
    assert hello.get("ok") is True, hello
    for i in range(20):  # warm-up
        await client.send({"type": "req", "id": f"w{i}", "method": "health"})
        await client.answer(f"w{i}")
    samples = []
    for i in range(count):
        t = time.perf_counter()
        await client.send({"type": "req", "id": f"h{i}", "method": "health"})
        answer = await client.answer(f"h{i}")
        samples.append(time.perf_counter() - t)
        assert answer.get("ok") is True, answer
    client.close()
    return percentile(samples, 0.5), percentile(samples, 0.99)


async def connect_latency(port: int, count: int) -> tuple[float, float]:
    """Fresh TCP each: connect, upgrade, challenge, connect request, hello-ok."""
    samples = []
    for _ in range(count):
        t = time.perf_counter()
        client = await RawClient.open(port)
        hello = await client.connect(READ)
        samples.append(time.perf_counter() - t)
        assert hello.get("ok") is True, hello
        client.close()
        await asyncio.sleep(0.001)
    return percentile(samples, 0.5), percentile(samples, 0.99)


async def open_idle(port: int, count: int) -> list[ClientConnection]:
    gate = asyncio.Semaphore(HANDSHAKES_AT_ONCE)

    async def one() -> ClientConnection:
        async with gate:
            ws, hello = await handshake(port, READ)
            assert hello.get("ok") is True, hello
            return ws

    return list(await asyncio.gather(*(one() for _ in range(count))))


async def fan_out(port: int, watchers: list[ClientConnection], key: str) -> tuple[float, float]:
    """One chat.send; each watcher's arrival time of the run's terminal chat event. Returns the
    spread (first watcher to last) and the time from the chat.send answer to the last watcher."""
    actor, hello = await handshake(port, WRITE)
    assert hello.get("ok") is True, hello
    loop = asyncio.get_running_loop()

    def terminal(frame: Json) -> bool:
        return bool(frame.get("event") == "chat"
                    and frame.get("payload", {}).get("state") in ("final", "error", "aborted"))

    async def watch(ws: ClientConnection) -> float:
        while True:
            frame = await recv_json(ws, 60)
            if terminal(frame):
                return loop.time()

    tasks = [asyncio.ensure_future(watch(ws)) for ws in watchers]
    answer = await request(actor, "s1", "chat.send", {"sessionKey": "main", "message": "hi", "idempotencyKey": key})
    answered = loop.time()
    assert answer.get("ok") is True, answer
    arrivals = await asyncio.gather(*tasks)
    await actor.close()
    return max(arrivals) - min(arrivals), max(arrivals) - answered


async def drain(watchers: list[ClientConnection]) -> None:
    """Reads what is queued so that idle connections stay idle (events from the fan-out)."""
    async def one(ws: ClientConnection) -> None:
        try:
            while True:
                await asyncio.wait_for(ws.recv(), 0.05)
        except (asyncio.TimeoutError, ConnectionClosed):
            pass
    await asyncio.gather(*(one(ws) for ws in watchers))


async def measure(server: Server, args: argparse.Namespace, round_no: int, log: Any) -> dict[str, float]:
    out: dict[str, float] = {}
    out["spawn_to_hello_s"] = await spawn_to_hello(server, log)
    assert server.process is not None
    pid = server.process.pid
    await asyncio.sleep(1.0)
    out["rss_idle_kib"] = rss_kib(pid)
    out["health_p50_s"], out["health_p99_s"] = await health_round_trips(server.port, args.health)
    out["connect_p50_s"], out["connect_p99_s"] = await connect_latency(server.port, args.connects)
    # The fan-out first, to exactly its watchers (both servers send chat events to every
    # read-scoped connection); then the rest of the idle connections.
    idle = await open_idle(server.port, args.fanout)
    spread, until_last = await fan_out(server.port, idle, f"bench-{round_no}")
    out["fanout_spread_s"], out["fanout_after_answer_s"] = spread, until_last
    await drain(idle)
    idle += await open_idle(server.port, args.idle - args.fanout)
    await asyncio.sleep(1.0)
    out["rss_conns_kib"] = rss_kib(pid)
    await asyncio.gather(*(ws.close() for ws in idle))
    server.process.send_signal(signal.SIGTERM)
    try:
        server.process.wait(30)
    except subprocess.TimeoutExpired:
        server.process.kill()
        server.process.wait()
    return out


def ratio_line(name: str, ours: float, real: float, goal: Optional[float], unit: str,
               scale: Callable[[float], str]) -> str:
    ratio = ours / real if real else float("inf")
    verdict = "" if goal is None else ("met" if ratio <= goal else "MISSED")
    goal_text = "" if goal is None else f"goal <= {goal:g}x"
    return f"{name:<34} ours {scale(ours):>10} {unit:<3} real {scale(real):>10} {unit:<3} ratio {ratio:8.4f}x  {goal_text:<16} {verdict}"


async def main_async(args: argparse.Namespace) -> int:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    resource.setrlimit(resource.RLIMIT_NOFILE, (max(soft, min(hard, 8192)), hard))
    rounds: dict[str, list[dict[str, float]]] = {"ours": [], "real": []}
    for i in range(args.rounds):
        ours = Server("ours", [args.agentwire, "serve", "--listen", f"127.0.0.1:{18000 + i}", "--token", TOKEN,
                               "--store", f"sqlite:{args.scratch}/ours-{i}.sqlite"], 18000 + i)
        real = Server("real", [args.node, args.openclaw, "gateway", "run", "--port", str(28000 + i),
                               "--bind", "loopback", "--auth", "token", "--token", TOKEN,
                               "--allow-unconfigured"], 28000 + i)
        order = [ours, real] if i % 2 == 0 else [real, ours]
        for server in order:
            with open(f"{args.scratch}/{server.name}-{i}.log", "wb") as log:
                figures = await measure(server, args, i, log)
            rounds[server.name].append(figures)
            print(f"round {i + 1} {server.name}: " + json.dumps({k: round(v, 6) for k, v in figures.items()}),
                  file=sys.stderr, flush=True)

    def med(name: str, key: str) -> float:
        return statistics.median(r[key] for r in rounds[name])

    ms: Callable[[float], str] = lambda s: f"{s * 1000:.3f}"
    sec: Callable[[float], str] = lambda s: f"{s:.3f}"
    mib: Callable[[float], str] = lambda k: f"{k / 1024:.1f}"
    lines = [
        f"gateway benchmark: medians of {args.rounds} rounds, rounds alternating which server goes first",
        ratio_line("health round trip p50", med("ours", "health_p50_s"), med("real", "health_p50_s"), 0.1, "ms", ms),
        ratio_line("health round trip p99", med("ours", "health_p99_s"), med("real", "health_p99_s"), 0.1, "ms", ms),
        ratio_line("connect -> hello-ok p50", med("ours", "connect_p50_s"), med("real", "connect_p50_s"), 0.1, "ms", ms),
        ratio_line("connect -> hello-ok p99", med("ours", "connect_p99_s"), med("real", "connect_p99_s"), 0.1, "ms", ms),
        ratio_line("RSS idle", med("ours", "rss_idle_kib"), med("real", "rss_idle_kib"), 1 / 50, "MiB", mib),
        ratio_line(f"RSS with {args.idle} idle connections", med("ours", "rss_conns_kib"),
                   med("real", "rss_conns_kib"), None, "MiB", mib),
        ratio_line("spawn -> first hello-ok", med("ours", "spawn_to_hello_s"), med("real", "spawn_to_hello_s"),
                   None, "s", sec),
        ratio_line(f"fan-out to {args.fanout}: first -> last", med("ours", "fanout_spread_s"),
                   med("real", "fanout_spread_s"), None, "ms", ms),
    ]
    lines.append(f"fan-out to {args.fanout}: chat.send answer -> last watcher: ours "
                 f"{ms(med('ours', 'fanout_after_answer_s'))} ms, real {ms(med('real', 'fanout_after_answer_s'))} ms "
                 "(not comparable: ours runs the demo agent, the real one fails over its model providers)")
    for name in ("ours", "real"):
        per_conn = statistics.median((r["rss_conns_kib"] - r["rss_idle_kib"]) / args.idle for r in rounds[name])
        lines.append(f"memory per idle connection ({name}): {per_conn:.1f} KiB "
                     f"(RSS with {args.idle} connections less RSS idle, / {args.idle})")
    print("\n".join(lines))
    print(json.dumps({"rounds": rounds}), file=sys.stderr)
    return 0


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--agentwire", required=True)
    parser.add_argument("--node", required=True)
    parser.add_argument("--openclaw", required=True)
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--health", type=int, default=500, help="health round trips a round")
    parser.add_argument("--connects", type=int, default=100, help="fresh connections a round")
    parser.add_argument("--idle", type=int, default=1000, help="idle connections held")
    parser.add_argument("--fanout", type=int, default=100, help="watchers of the fan-out")
    sys.exit(asyncio.run(main_async(parser.parse_args())))


if __name__ == "__main__":
    main()
