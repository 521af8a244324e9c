"""Drives `agentwire serve --listen` with the `websockets` client, one scenario at a time, and
prints a JSON report: what each step got back (frames, close codes and reasons), and every frame
the gateway sent, with the method each response answered, so the test can check them all.

usage: python gateway_driver.py PORT TOKEN SCENARIO

The scenarios `ready` and `cases` run against any OpenClaw gateway, ours or the real one: `ready`
waits until the gateway answers `connect` with hello-ok, and `cases` reports, per protocol
client case, how the gateway answered (close code, error code, details.code), so that two
gateways can be compared.
"""

import asyncio
import json
import socket
import sys
from typing import Any, Optional

import websockets
from websockets.asyncio.client import ClientConnection
from websockets.exceptions import ConnectionClosed

Json = Any
Report = dict[str, Any]

CLIENT = {"id": "cli", "displayName": "driver", "version": "dev", "platform": "python", "mode": "cli"}
READ = ["operator.read"]
ALL = ["operator.read", "operator.write", "operator.approvals"]


class Recorder:
    """Every frame received, with the method of the request a response answers."""

    def __init__(self) -> None:
        self.frames: list[Json] = []
        self.methods: dict[str, str] = {}

    def sent(self, request: Json) -> None:
        self.methods[request["id"]] = request["method"]

    def got(self, frame: Json) -> None:
        subject = self.methods.get(frame.get("id", ""), "") if frame.get("type") == "res" else ""
        self.frames.append({"frame": frame, "method": subject})


RECORDER = Recorder()


class Client:
    def __init__(self, ws: ClientConnection) -> None:
        self.ws = ws
        self.inbox: list[Json] = []
        self.seen: list[Json] = []
        self.counter = 0

    async def send(self, request: Json) -> None:
        RECORDER.sent(request)
        await self.ws.send(json.dumps(request))

    async def request(self, method: str, params: Optional[Json] = None) -> Json:
        self.counter += 1
        request: Json = {"type": "req", "id": f"r{self.counter}", "method": method}
        if params is not None:
            request["params"] = params
        await self.send(request)
        return await self.wait(lambda f: f.get("type") == "res" and f.get("id") == request["id"])

    async def next(self, timeout: float = 10) -> Json:
        frame = json.loads(await asyncio.wait_for(self.ws.recv(), timeout))
        RECORDER.got(frame)
        self.seen.append(frame)
        return frame

    async def wait(self, match: Any, timeout: float = 20) -> Json:
        for i, frame in enumerate(self.inbox):
            if match(frame):
                return self.inbox.pop(i)
        loop = asyncio.get_running_loop()
        end = loop.time() + timeout
        while True:
            frame = await self.next(max(0.01, end - loop.time()))
            if match(frame):
                return frame
            self.inbox.append(frame)

    def events(self, name: str) -> list[Json]:
        return [f for f in self.inbox if f.get("type") == "event" and f.get("event") == name]


async def open_client(port: int) -> Client:
    return Client(await websockets.connect(f"ws://127.0.0.1:{port}", max_size=None))


async def connected(port: int, token: Optional[str], scopes: Optional[list[str]]) -> tuple[Client, Json]:
    c = await open_client(port)
    challenge = await c.next()
    params: Json = {"minProtocol": 4, "maxProtocol": 4, "client": CLIENT}
    if scopes is not None:
        params["scopes"] = scopes
    if token is not None:
        params["auth"] = {"token": token}
    await c.send({"type": "req", "id": "c1", "method": "connect", "params": params})
    hello = await c.wait(lambda f: f.get("id") == "c1")
    assert challenge["event"] == "connect.challenge", challenge
    return c, hello


async def closing(c: Client, timeout: float = 20) -> Json:
    """Frames until the server closes, and how it closed."""
    frames: list[Json] = []
    try:
        while True:
            frames.append(await c.next(timeout))
    except ConnectionClosed as closed:
        rcvd = closed.rcvd
        return {
            "frames": frames,
            "code": rcvd.code if rcvd is not None else None,
            "reason": rcvd.reason if rcvd is not None else None,
        }


async def handshake(port: int, token: str) -> Report:
    out: Report = {}
    c = await open_client(port)
    out["challenge"] = await c.next()
    await c.send({
        "type": "req", "id": "c1", "method": "connect",
        "params": {"minProtocol": 4, "maxProtocol": 4, "client": CLIENT, "scopes": READ, "auth": {"token": token}},
    })
    out["hello"] = await c.wait(lambda f: f.get("id") == "c1")
    for method in ["health", "status", "system-presence", "sessions.list"]:
        out[method] = await c.request(method)
    out["unknown_method"] = await c.request("config.set", {})
    out["chat_send_read_only"] = await c.request(
        "chat.send", {"sessionKey": "main", "message": "hi", "idempotencyKey": "k"})
    out["bad_params"] = await c.request("sessions.list", {"limit": 0})
    out["second_connect"] = await c.request("connect", {"minProtocol": 4, "maxProtocol": 4, "client": CLIENT})
    await c.ws.send(json.dumps({"type": "req", "id": 7, "method": "health"}))
    out["numeric_id"] = await c.wait(lambda f: f.get("id") == "7")
    await c.ws.send("not json")
    out["after_garbage"] = await c.request("health")
    await c.ws.close()
    return out


async def refused(port: int, first: Any) -> Json:
    c = await open_client(port)
    await c.next()
    try:
        await c.ws.send(first if isinstance(first, str) else json.dumps(first))
    except ConnectionClosed:
        pass  # closed while sending: how it closed is read below
    return await closing(c)


def connect_frame(**params: Any) -> Json:
    base: Json = {"minProtocol": 4, "maxProtocol": 4, "client": CLIENT}
    base.update(params)
    return {"type": "req", "id": "c1", "method": "connect", "params": base}


async def errors(port: int, token: str) -> Report:
    auth = {"token": token}
    out: Report = {
        "mismatch": await refused(port, connect_frame(minProtocol=5, maxProtocol=5, auth=auth)),
        "first_not_connect": await refused(port, {"type": "req", "id": "h", "method": "health"}),
        "first_not_request": await refused(port, {"type": "event", "event": "x"}),
        "not_json": await refused(port, "hello"),
        "invalid_params": await refused(port, connect_frame(client=dict(CLIENT, mode="operator"), auth=auth)),
        "wrong_token": await refused(port, connect_frame(auth={"token": "nope"})),
        "no_token": await refused(port, connect_frame()),
        "preauth_over": await refused(port, "x" * (64 * 1024 + 1)),
        "preauth_exact": await refused(port, "x" * (64 * 1024)),
    }
    # After the handshake, a frame over maxPayload closes 1009; one under it is read.
    c, hello = await connected(port, token, READ)
    max_payload = hello["payload"]["policy"]["maxPayload"]
    big = json.dumps({"type": "req", "id": "big", "method": "health", "params": {"pad": "x" * 100_000}})
    await c.ws.send(big)
    out["under_max_payload"] = await c.wait(lambda f: f.get("id") == "big")
    try:
        await c.ws.send("x" * (max_payload + 1))
    except ConnectionClosed:
        pass
    out["over_max_payload"] = await closing(c)
    return out


async def run(port: int, token: str) -> Report:
    out: Report = {}
    actor, _ = await connected(port, token, ALL)
    watcher, _ = await connected(port, token, READ)
    chat = {"sessionKey": "team", "message": "hello there", "idempotencyKey": "k-1"}
    out["chat_send"] = await actor.request("chat.send", chat)
    out["chat_send_retry"] = await actor.request("chat.send", chat)
    run_id = out["chat_send"]["payload"]["runId"]

    def final(f: Json) -> bool:
        return bool(f.get("event") == "chat" and f["payload"]["runId"] == run_id
                    and f["payload"]["state"] == "final")

    out["final_actor"] = await actor.wait(final)
    out["final_watcher"] = await watcher.wait(final)
    out["chat_send_after"] = await actor.request("chat.send", chat)
    out["chat_send_other"] = await actor.request("chat.send", dict(chat, message="other"))
    out["history"] = await actor.request("chat.history", {"sessionKey": "team"})
    out["agent"] = await actor.request("agent", {"message": "/approve ls", "sessionKey": "team", "idempotencyKey": "a-1"})
    agent_id = out["agent"]["id"]
    requested = await actor.wait(lambda f: f.get("event") == "exec.approval.requested")
    out["requested"] = requested
    # An approver that connects while the approval is pending is sent it too.
    late, _ = await connected(port, token, ["operator.approvals"])
    out["late_requested"] = await late.wait(lambda f: f.get("event") == "exec.approval.requested")
    await late.ws.close()
    out["resolve"] = await actor.request(
        "exec.approval.resolve", {"id": requested["payload"]["id"], "decision": "allow-once"})
    out["resolve_again"] = await actor.request(
        "exec.approval.resolve", {"id": requested["payload"]["id"], "decision": "deny"})
    out["resolved"] = await actor.wait(lambda f: f.get("event") == "exec.approval.resolved")
    out["agent_end"] = await actor.wait(lambda f: f.get("type") == "res" and f.get("id") == agent_id)
    agent_run = out["agent"]["payload"]["runId"]
    await watcher.wait(lambda f: f.get("event") == "chat" and f["payload"]["runId"] == agent_run
                       and f["payload"]["state"] == "final")
    await asyncio.sleep(0.2)
    for name, c in [("actor", actor), ("watcher", watcher)]:
        out[f"{name}_events"] = [
            {"event": f["event"], "seq": f.get("seq"), "runId": f["payload"].get("runId"),
             "state": f["payload"].get("state"), "stream": f["payload"].get("stream"),
             "runSeq": f["payload"].get("seq")}
            for f in c.seen
            if f.get("type") == "event" and f["event"] not in ("tick", "connect.challenge")
        ]
    await actor.ws.close()
    await watcher.ws.close()
    return out


async def slow(port: int, token: str) -> Report:
    """A connection that stops reading while runs write large messages: it is closed 1008
    "slow consumer" once its queue is full; a connection that reads gets every event."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect(("127.0.0.1", port))
    # max_queue=1: the client stops reading the socket as soon as one frame waits unread.
    stalled = Client(await websockets.connect(
        f"ws://127.0.0.1:{port}", sock=sock, max_size=None, max_queue=1))
    await stalled.next()
    await stalled.send(connect_frame(scopes=READ, auth={"token": token}))
    await stalled.wait(lambda f: f.get("id") == "c1")
    reader, _ = await connected(port, token, READ)
    actor, _ = await connected(port, token, ALL)
    finals = 0
    for i in range(24):
        sent = await actor.request(
            "chat.send", {"sessionKey": "load", "message": "/big 400000", "idempotencyKey": f"s-{i}"})
        run_id = sent["payload"]["runId"]

        def done(f: Json) -> bool:
            return bool(f.get("event") == "chat" and f["payload"]["runId"] == run_id
                        and f["payload"]["state"] == "final")

        await reader.wait(done, timeout=60)
        finals += 1
    # Now the stalled connection reads what reached it, and how it was closed.
    ended = await closing(stalled, timeout=30)
    await reader.ws.close()
    await actor.ws.close()
    return {
        "reader_finals": finals,
        "stalled_code": ended["code"],
        "stalled_reason": ended["reason"],
        "stalled_frames": len(ended["frames"]),
    }


async def origins(port: int, token: str) -> Report:
    out: Report = {}
    for name, origin in [("foreign", "http://evil.example"), ("own", f"http://127.0.0.1:{port}")]:
        c = Client(await websockets.connect(f"ws://127.0.0.1:{port}", origin=origin))  # type: ignore[arg-type]
        await c.next()
        await c.send(connect_frame(scopes=READ, auth={"token": token}))
        out[name] = await c.wait(lambda f: f.get("id") == "c1")
        if out[name]["ok"]:
            await c.ws.close()
        else:
            out[name + "_close"] = await closing(c)
    return out


async def ticks(port: int, token: str) -> Report:
    c, hello = await connected(port, token, READ)
    loop = asyncio.get_running_loop()
    times: list[float] = []
    seqs: list[int] = []
    while len(times) < 4:
        frame = await c.wait(lambda f: f.get("event") == "tick")
        times.append(loop.time())
        seqs.append(frame["seq"])
    await c.ws.close()
    return {
        "interval_ms": hello["payload"]["policy"]["tickIntervalMs"],
        "gaps_ms": [round((b - a) * 1000) for a, b in zip(times, times[1:])],
        "seqs": seqs,
    }


async def many(port: int, token: str) -> Report:
    count = 1000
    # Handshakes 16 at a time (the gateway serves 32 at once), the connections all kept open.
    handshaking = asyncio.Semaphore(16)

    async def one() -> tuple[Client, Json]:
        async with handshaking:
            return await connected(port, token, READ)

    clients = await asyncio.gather(*(one() for _ in range(count)))
    oks = sum(1 for _, hello in clients if hello.get("ok") is True)
    healths = await asyncio.gather(*(c.request("health") for c, _ in clients[:50]))
    await asyncio.gather(*(c.ws.close() for c, _ in clients))
    return {"connected": oks, "health_ok": sum(1 for h in healths if h.get("ok") is True)}


# The real gateway took 6-14 s from spawn to hello-ok on a 2-core machine; a loaded CI machine
# running other tests at the same time gets a margin.
READY_BUDGET_S = 45.0


async def ready(port: int, token: str) -> Report:
    """Polls `connect` until hello-ok: the real gateway opens its port seconds before it serves,
    answering UNAVAILABLE and closing 1013 meanwhile."""
    loop = asyncio.get_running_loop()
    started = loop.time()
    attempts = 0
    last: Json = None
    while loop.time() - started < READY_BUDGET_S:
        attempts += 1
        try:
            c, hello = await connected(port, token, READ)
            await c.ws.close()
            if hello.get("ok") is True:
                return {"ready": True, "attempts": attempts, "waited_ms": round((loop.time() - started) * 1000)}
            last = hello
        except (OSError, ConnectionClosed, asyncio.TimeoutError, websockets.InvalidStatus) as error:
            last = repr(error)
        await asyncio.sleep(0.25)
    return {"ready": False, "attempts": attempts, "last": last}


def outcome(frames: list[Json], code: Optional[int], reason: Optional[str]) -> Report:
    """How a gateway answered one case: the first response's error and details codes (None when
    it answered ok or not at all), and the close code and reason (None while it stays open)."""
    res = next((f for f in frames if f.get("type") == "res"), None)
    error = res.get("error") if res is not None else None
    return {
        "answered": res is not None,
        "ok": res.get("ok") if res is not None else None,
        "error": error.get("code") if error else None,
        "detail": (error.get("details") or {}).get("code") if error else None,
        "close": code,
        "reason": reason,
    }


async def after_hello(port: int, token: str, scopes: list[str], frame: Any) -> Report:
    """Sends `frame` after hello-ok; the answer, and whether the connection stays open."""
    c, hello = await connected(port, token, scopes)
    assert hello.get("ok") is True, hello
    await c.ws.send(frame if isinstance(frame, str) else json.dumps(frame))
    answer = await c.wait(lambda f: f.get("type") == "res" and str(f.get("id")) == str(frame["id"]))
    # Still open: a request after the case is answered.
    health = await c.request("health")
    await c.ws.close()
    report = outcome([answer], None, None)
    report["id"] = answer.get("id")
    report["open_after"] = health.get("ok") is True
    return report


PREAUTH_CAP = 64 * 1024


def padded_frame(size: int) -> str:
    """A JSON frame that is not a request (an event), exactly `size` bytes long."""
    empty = json.dumps({"type": "event", "event": "x", "pad": ""})
    frame = json.dumps({"type": "event", "event": "x", "pad": "x" * (size - len(empty))})
    assert len(frame) == size
    return frame


async def cases(port: int, token: str) -> Report:
    auth = {"token": token}
    refusals: dict[str, Any] = {
        "mismatch": connect_frame(minProtocol=5, maxProtocol=5, auth=auth),
        "first_not_connect": {"type": "req", "id": "h", "method": "health"},
        "first_not_request": {"type": "event", "event": "x"},
        "not_json": "hello",
        "invalid_params": connect_frame(client=dict(CLIENT, mode="operator"), auth=auth),
        "wrong_token": connect_frame(auth={"token": "nope"}),
        "no_token": connect_frame(),
        # JSON, so that what is compared is the cap and not the parse of a non-JSON frame.
        "preauth_over": padded_frame(PREAUTH_CAP + 1),
        "preauth_exact": padded_frame(PREAUTH_CAP),
    }
    out: Report = {}
    for name, first in refusals.items():
        closed = await refused(port, first)
        out[name] = outcome(closed["frames"], closed["code"], closed["reason"])
    chat = {"sessionKey": "main", "message": "hi", "idempotencyKey": "k-scope"}
    out["chat_send_read_scope"] = await after_hello(
        port, token, READ, {"type": "req", "id": "s1", "method": "chat.send", "params": chat})
    out["unknown_method_read_scope"] = await after_hello(
        port, token, READ, {"type": "req", "id": "u1", "method": "no.such.method"})
    out["numeric_id"] = await after_hello(
        port, token, READ, {"type": "req", "id": 7, "method": "health"})
    return out


SCENARIOS = {
    "handshake": handshake,
    "errors": errors,
    "run": run,
    "slow": slow,
    "origins": origins,
    "ticks": ticks,
    "many": many,
    "ready": ready,
    "cases": cases,
}


def main() -> None:
    port, token, scenario = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    report = asyncio.run(SCENARIOS[scenario](port, token))
    report["frames"] = RECORDER.frames
    print(json.dumps(report))


if __name__ == "__main__":
    main()
