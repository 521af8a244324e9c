"""Drives `agentwire serve --app-server` through the real ChainlessChain SDK (`AppServerClient`).

usage: python app_server_driver.py AGENTWIRE_BINARY STATE_DIR SCENARIO

Each scenario prints one JSON object on stdout: what the SDK handed the host (results,
errors, every notification in arrival order, every server request), for the Rust test to
check. Every line the server wrote is also checked with the SDK's own validator
(`validate_protocol_message`) through a tap on the SDK's reader; a failure is reported in
`invalid_lines`.
"""

import asyncio
import json
import sys
import time
from typing import Any, Callable, Coroutine, Optional

from chainlesschain_agent_sdk.app_server import (
    AppServerClient,
    AppServerClientOptions,
    AppServerRpcError,
)
from chainlesschain_agent_sdk.generated_app_protocol import validate_protocol_message


def main() -> None:
    binary, state_dir, scenario = sys.argv[1:4]
    print(json.dumps(asyncio.run(SCENARIOS[scenario](binary, state_dir))))


# A JSON value as the SDK hands it over, and a scenario's report.
Json = Any
Report = dict[str, Any]


class Recorder:
    def __init__(self) -> None:
        self.notifications: list[Json] = []
        self.requests: list[Json] = []
        # A decision, an exception to raise, or ("late", seconds, decision).
        self.decision: Json = {"kind": "acceptOnce"}
        self.invalid_lines: list[Json] = []

    def on_notification(self, message: Json) -> None:
        self.check(message)
        self.notifications.append(message)

    def on_server_request(self, message: Json) -> Json:
        self.check(message)
        self.requests.append(message)
        if isinstance(self.decision, Exception):
            raise self.decision
        if callable(self.decision):
            return self.decision(message)
        if isinstance(self.decision, tuple):
            # ("late", seconds, decision): a host that answers after the server stopped waiting.
            _, seconds, decision = self.decision
            time.sleep(seconds)
            return decision
        return self.decision

    def check(self, message: Json) -> None:
        try:
            validate_protocol_message(message)
        except Exception as error:  # noqa: BLE001 - reported to the test
            self.invalid_lines.append({"message": message, "error": str(error)})

    def methods(self) -> list[str]:
        return [n["method"] for n in self.notifications]


def client(binary: str, state_dir: str, recorder: Recorder, **options: Any) -> AppServerClient:
    return AppServerClient(
        AppServerClientOptions(
            cli_path=binary,
            state_directory=state_dir,
            request_timeout_seconds=20,
            **options,
        ),
        on_server_request=recorder.on_server_request,
        on_notification=recorder.on_notification,
    )


async def call(
    c: AppServerClient, method: str, params: Json, recorder: Optional[Recorder] = None
) -> Report:
    """The answer, and with a recorder, how many notifications had arrived before it."""
    try:
        out: Report = {"result": await c.request(method, params)}
    except AppServerRpcError as error:
        out = {"error": {"code": error.code, "message": str(error), "data": error.data}}
    if recorder is not None:
        out["notifications_before"] = len(recorder.notifications)
    return out


async def until_turn_completed(recorder: Recorder, turn_id: str, timeout: float = 20) -> None:
    async def wait() -> None:
        while not any(
            n["method"] == "turn/completed" and n["params"]["turn"]["id"] == turn_id
            for n in recorder.notifications
        ):
            await asyncio.sleep(0.01)
        # thread/updated follows turn/completed
        await asyncio.sleep(0.05)

    await asyncio.wait_for(wait(), timeout)


async def basic(binary: str, state_dir: str) -> Report:
    recorder = Recorder()
    c = client(binary, state_dir, recorder)
    out: Report = {"initialize": await c.start()}
    out["second_initialize"] = await call(
        c,
        "initialize",
        {"protocolVersion": 1, "minimumProtocolVersion": 1, "client": {"name": "x", "version": "1"}},
    )
    out["thread_start"] = await call(c, "thread/start", {"threadId": "thread-1", "title": "First"})
    out["thread_start_again"] = await call(c, "thread/start", {"threadId": "thread-1"})
    out["thread_start_bad_id"] = await call(c, "thread/start", {"threadId": "-bad id"})
    before = len(recorder.notifications)
    out["turn_start"] = await call(
        c,
        "turn/start",
        {"threadId": "thread-1", "turnId": "turn-1", "input": "hello there"},
        recorder,
    )
    out["turn_start"]["notifications_before"] -= before
    await until_turn_completed(recorder, "turn-1")
    out["turn_notifications"] = recorder.notifications[before:]
    before = len(recorder.notifications)
    await call(c, "turn/start", {"threadId": "thread-1", "turnId": "big-1", "input": "/big 200000"})
    await until_turn_completed(recorder, "big-1")
    big = recorder.notifications[before:]
    out["big"] = {
        "methods": sorted(set(n["method"] for n in big)),
        "delta_bytes": [len(n["params"]["delta"]["text"]) for n in big if n["method"] == "item/delta"],
        "completed": [n["params"]["item"] for n in big if n["method"] == "item/completed"],
    }
    keyed = {"threadId": "thread-1", "turnId": "idem-1", "input": "hi", "idempotencyKey": "k-1"}
    out["idem_first"] = await call(c, "turn/start", keyed)
    await until_turn_completed(recorder, "idem-1")
    out["idem_again"] = await call(c, "turn/start", keyed)
    out["idem_other"] = await call(c, "turn/start", dict(keyed, input="other"))
    out["empty_input"] = await call(c, "turn/start", {"threadId": "thread-1", "input": ""})
    out["unknown_thread"] = await call(c, "turn/start", {"threadId": "nope", "input": "x"})
    out["unknown_method"] = await call(c, "thread/rename", {"threadId": "thread-1"})
    out["thread_list"] = await call(c, "thread/list", {})
    out["thread_read"] = await call(c, "thread/read", {"threadId": "thread-1"})
    out["read_unknown"] = await call(c, "thread/read", {"threadId": "nope"})
    await c.close()
    out["running_after_close"] = c.running
    out["invalid_lines"] = recorder.invalid_lines
    return out


async def approvals(binary: str, state_dir: str) -> Report:
    recorder = Recorder()
    c = client(binary, state_dir, recorder)
    await c.start()
    await call(c, "thread/start", {"threadId": "thread-a"})
    out: Report = {}
    # Each case runs its own command, so a grant one gives covers none of the others.
    cases: list[tuple[str, Json, str]] = [
        ("accept-once", {"kind": "acceptOnce"}, "/approve ls once"),
        ("accept-turn", {"kind": "acceptForTurn", "permissions": []}, "/repeat 3 ls turn"),
        ("accept-session", {"kind": "acceptForSession"}, "/approve ls session"),
        # Nobody is asked: the session's grant covers both runs.
        ("session-later", RuntimeError("not asked"), "/repeat 2 ls session"),
        ("decline", {"kind": "decline", "reason": "not today"}, "/approve ls decline"),
        ("invalid", {"kind": "acceptOnce", "permissions": []}, "/approve ls invalid"),
        ("error", RuntimeError("the dialog crashed"), "/approve ls error"),
        (
            "beyond-request",
            {"kind": "acceptForSession", "permissions": [{"capability": "shell", "scope": "/"}]},
            "/approve ls beyond",
        ),
    ]
    for index, (name, decision, command) in enumerate(cases):
        recorder.decision = decision
        before = len(recorder.notifications)
        asked = len(recorder.requests)
        turn = f"turn-{index}"
        await call(c, "turn/start", {"threadId": "thread-a", "turnId": turn, "input": command})
        await until_turn_completed(recorder, turn)
        out[name] = {
            "notifications": recorder.notifications[before:],
            "requests": recorder.requests[asked:],
        }
    await c.close()
    out["invalid_lines"] = recorder.invalid_lines
    return out


async def interrupt(binary: str, state_dir: str) -> Report:
    recorder = Recorder()
    c = client(binary, state_dir, recorder)
    await c.start()
    await call(c, "thread/start", {"threadId": "thread-i"})
    out: Report = {}
    out["turn_start"] = await call(
        c, "turn/start", {"threadId": "thread-i", "turnId": "slow-1", "input": "/slow 400"}
    )
    out["second_turn"] = await call(
        c, "turn/start", {"threadId": "thread-i", "turnId": "slow-2", "input": "hi"}
    )
    await asyncio.sleep(0.2)
    out["interrupt"] = await call(
        c, "turn/interrupt", {"threadId": "thread-i", "turnId": "slow-1"}, recorder
    )
    seen = recorder.notifications[: out["interrupt"].pop("notifications_before")]
    out["completed_before_reply"] = [n for n in seen if n["method"] == "turn/completed"]
    out["interrupt_again"] = await call(
        c, "turn/interrupt", {"threadId": "thread-i", "turnId": "slow-1"}
    )
    out["interrupt_unknown"] = await call(
        c, "turn/interrupt", {"threadId": "thread-i", "turnId": "never"}
    )
    await c.close()
    out["invalid_lines"] = recorder.invalid_lines
    return out


async def negotiation(binary: str, state_dir: str) -> Report:
    out: Report = {}
    recorder = Recorder()
    c = client(binary, state_dir, recorder, features=("thread_turn_item", "typed_graph"))
    out["reduced"] = await c.start()
    await c.close()
    recorder = Recorder()
    c = client(binary, state_dir, recorder, features=("typed_graph",))
    out["empty"] = await c.start()
    await c.close()
    return out


async def spawn(binary: str, state_dir: str) -> Report:
    """Every spawn option the SDK has: the store kind, the queue cap, a state dir or a path."""
    out: Report = {}
    recorder = Recorder()
    c = client(binary, state_dir, recorder, storage_backend="jsonl", server_queue_cap=7)
    out["with_dir"] = await c.start()
    await call(c, "thread/start", {"threadId": "kept"})
    await c.close()
    # The same state directory again: the thread is still there.
    c = client(binary, state_dir, recorder, storage_backend="sqlite")
    await c.start()
    out["listed_again"] = await call(c, "thread/list", {})
    await c.close()
    c = AppServerClient(
        AppServerClientOptions(
            cli_path=binary,
            state_path=state_dir + "/elsewhere/state.sqlite",
            request_timeout_seconds=20,
        ),
        on_notification=recorder.on_notification,
    )
    await c.start()
    out["listed_by_path"] = await call(c, "thread/list", {})
    await c.close()
    out["invalid_lines"] = recorder.invalid_lines
    return out


async def threads(binary: str, state_dir: str) -> Report:
    recorder = Recorder()
    c = client(binary, state_dir, recorder)
    await c.start()
    out: Report = {}
    await call(c, "thread/start", {"threadId": "source", "title": "Source"})
    out["fork"] = await call(
        c, "thread/fork", {"threadId": "source", "newThreadId": "forked", "title": "Fork"}
    )
    out["fork_unknown"] = await call(c, "thread/fork", {"threadId": "nope"})
    out["fork_taken"] = await call(c, "thread/fork", {"threadId": "source", "newThreadId": "forked"})
    await call(c, "turn/start", {"threadId": "forked", "turnId": "long", "input": "/slow 400"})
    out["archive_active"] = await call(c, "thread/archive", {"threadId": "forked"})
    await call(c, "turn/interrupt", {"threadId": "forked", "turnId": "long"})
    out["archive"] = await call(c, "thread/archive", {"threadId": "source"})
    out["turn_on_archived"] = await call(c, "turn/start", {"threadId": "source", "input": "hi"})
    out["list"] = await call(c, "thread/list", {})
    out["list_all"] = await call(c, "thread/list", {"includeArchived": True})
    await c.close()
    out["invalid_lines"] = recorder.invalid_lines
    return out


async def approval_timeout(binary: str, state_dir: str) -> Report:
    """The server is spawned with `--approval-timeout 1` (by the test's wrapper); the host
    answers after 2.5 s."""
    recorder = Recorder()
    recorder.decision = ("late", 2.5, {"kind": "acceptOnce"})
    c = client(binary, state_dir, recorder)
    await c.start()
    await call(c, "thread/start", {"threadId": "thread-t"})
    before = len(recorder.notifications)
    await call(c, "turn/start", {"threadId": "thread-t", "turnId": "late-1", "input": "/approve ls"})
    await until_turn_completed(recorder, "late-1")
    out = {"notifications": recorder.notifications[before:]}
    await c.close()
    out["invalid_lines"] = recorder.invalid_lines
    return out


def exact_task_answer(message: Json) -> Json:
    """The answer `humanTask/decide` takes: the task's binding repeated, the actor, the decision."""
    task = message["params"]["task"]
    return {
        "humanTaskId": task["id"],
        "runId": task["runId"],
        "revisionDigest": task["revisionDigest"],
        "operationDigest": task["operationDigest"],
        "nonce": task["nonce"],
        "actorId": "reviewer-1",
        "decision": {"kind": "acceptOnce"},
    }


async def until_event(recorder: Recorder, kind: str, timeout: float = 20) -> Json:
    async def wait() -> Json:
        while True:
            for n in recorder.notifications:
                if n["method"] == "graph/event" and n["params"].get("type") == kind:
                    return n
            await asyncio.sleep(0.01)

    return await asyncio.wait_for(wait(), timeout)


async def human_tasks(binary: str, state_dir: str) -> Report:
    """A host with no handler (the SDK answers its default decline), then one answering exactly."""
    out: Report = {}
    declining = Recorder()
    c = AppServerClient(
        AppServerClientOptions(cli_path=binary, state_directory=state_dir, request_timeout_seconds=20),
        on_notification=declining.on_notification,
    )
    out["initialize"] = await c.start()
    await call(c, "thread/start", {"threadId": "thread-h1"})
    await call(c, "turn/start", {"threadId": "thread-h1", "turnId": "review-1", "input": "/review"})
    out["default_decline"] = await until_event(declining, "humanTask/refused")
    out["default_decline_notifications"] = declining.notifications
    await c.close()

    exact = Recorder()
    exact.decision = exact_task_answer
    c = client(binary, state_dir, exact)
    await c.start()
    await call(c, "thread/start", {"threadId": "thread-h2"})
    await call(c, "turn/start", {"threadId": "thread-h2", "turnId": "review-2", "input": "/review"})
    await until_turn_completed(exact, "review-2")
    out["exact_requests"] = exact.requests
    out["exact_notifications"] = exact.notifications
    await c.close()
    out["invalid_lines"] = declining.invalid_lines + exact.invalid_lines
    return out


SCENARIOS: dict[str, Callable[[str, str], Coroutine[Any, Any, Report]]] = {
    "approval_timeout": approval_timeout,
    "threads": threads,
    "spawn": spawn,
    "basic": basic,
    "approvals": approvals,
    "interrupt": interrupt,
    "negotiation": negotiation,
    "human_tasks": human_tasks,
}

if __name__ == "__main__":
    main()
