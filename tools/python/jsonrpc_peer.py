"""An asyncio JSON-RPC 2.0 NDJSON peer, the way a Python host or agent writes one.

usage: python jsonrpc_peer.py   (speaks on stdin/stdout; exits at end of input)

It answers ``echo`` with its params and ``ask`` by first asking the other side
``host/double {"n": n}`` and then answering ``{"doubled": value}``. On the notification
``start {"count": N}`` it sends N concurrent ``host/double`` requests, checks every result, and
reports ``done {"ok": bool, "count": N}``. Requests run as tasks, so it keeps reading while
they wait. Unknown methods get -32601.
"""

from __future__ import annotations

import asyncio
import json
import sys
from typing import Any


async def main() -> None:
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=1 << 24)
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    transport, protocol = await loop.connect_write_pipe(
        asyncio.streams.FlowControlMixin, sys.stdout
    )
    writer = asyncio.StreamWriter(transport, protocol, reader, loop)
    pending: dict[str, asyncio.Future[Any]] = {}
    tasks: set[asyncio.Task[None]] = set()
    counter = 0

    async def send(message: dict[str, Any]) -> None:
        writer.write((json.dumps(message, separators=(",", ":")) + "\n").encode())
        await writer.drain()

    async def request(method: str, params: Any) -> Any:
        nonlocal counter
        counter += 1
        request_id = f"py-{counter}"
        future: asyncio.Future[Any] = loop.create_future()
        pending[request_id] = future
        await send({"jsonrpc": "2.0", "id": request_id, "method": method, "params": params})
        return await future

    async def handle(message: dict[str, Any]) -> None:
        method = message["method"]
        params: Any = message.get("params") or {}
        if "id" not in message:
            if method == "start":
                count = params["count"]
                results = await asyncio.gather(
                    *(request("host/double", {"n": i}) for i in range(count))
                )
                ok = all(r == {"value": 2 * i} for i, r in enumerate(results))
                await send(
                    {"jsonrpc": "2.0", "method": "done", "params": {"ok": ok, "count": count}}
                )
            return
        if method == "echo":
            reply: dict[str, Any] = {"result": params}
        elif method == "ask":
            answer = await request("host/double", {"n": params["n"]})
            reply = {"result": {"doubled": answer["value"]}}
        else:
            reply = {"error": {"code": -32601, "message": f"method not found: {method}"}}
        await send({"jsonrpc": "2.0", "id": message["id"], **reply})

    while True:
        line = await reader.readline()
        if not line:
            break
        if not line.strip():
            continue
        message = json.loads(line)
        if "method" in message:
            task = loop.create_task(handle(message))
            tasks.add(task)
            task.add_done_callback(tasks.discard)
        else:
            future = pending.pop(message["id"])
            if "error" in message:
                future.set_exception(RuntimeError(json.dumps(message["error"])))
            else:
                future.set_result(message["result"])


asyncio.run(main())
