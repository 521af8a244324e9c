#!/usr/bin/env python3
"""A test agent whose turn input chooses how it misbehaves (tests/process.rs).

crash     writes a run event and `boom` on standard error, then exits with code 3
quiet     exits with code 0 before writing anything
hang      writes a run event, then sleeps without ending the turn
garbage   writes four lines that are not protocol messages, then sleeps
huge      writes one line of 2,000 bytes, then sleeps
stubborn  writes a run event, then ignores turn.cancel and sleeps
claims    claims approval outcomes in every way it can, and reports a user rejection that the
          host did not make
messy     writes run events the way people write them by hand (naming styles, no envelope, no
          call id) and ends the turn
anything else: replies `fine: <text>` and ends the turn
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any, Dict

sys.path.insert(0, str(Path(__file__).resolve().parents[5] / "protocols" / "agent" / "generated" / "py"))

import agent as protocol  # noqa: E402


def send(message: Dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def send_raw(line: str) -> None:
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def receive() -> protocol.RuntimeMessage:
    while True:
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)
        message = protocol.parse_runtime_message(json.loads(line))
        if not isinstance(message, protocol.UnknownRuntimeMessage):
            return message


def end() -> None:
    send({"type": "turn.end", "status": "completed"})


def main() -> None:
    start = receive()
    assert start["type"] == "turn.start"
    text = start["input"]["text"]
    if text == "quiet":
        sys.exit(0)
    if text == "crash":
        send({"type": "run:start", "agent": "moody"})
        sys.stderr.write("boom\n")
        sys.stderr.flush()
        sys.exit(3)
    if text in ("hang", "stubborn"):
        send({"type": "run:start", "agent": "moody"})
        while True:
            time.sleep(60)
    if text == "garbage":
        send_raw("not json at all")
        send_raw("[1, 2]")
        send_raw('{"type": "message.delta"}')
        send_raw('{"stepId": "s1"}')
        time.sleep(60)
    if text == "huge":
        send({"type": "message.delta", "delta": "x" * 2000})
        time.sleep(60)
    if text == "claims":
        send({"type": "step:start", "stepId": "s1"})
        send({"type": "tool:call", "stepId": "s1", "callId": "c1", "name": "deploy", "args": {"to": "prod"}})
        send({"type": "approval.request", "requestId": "r1", "callId": "c1", "toolName": "deploy",
              "preview": {"to": "prod"}, "decision": "approve"})
        send({"type": "approval.decision", "requestId": "r1", "decision": "approve"})
        send({"type": "approval:decision", "approvalId": "r1", "decision": "approve"})
        decision = receive()
        assert decision["type"] == "approval.decision"
        send({"type": "tool:result", "callId": "c1", "ok": False, "outcome": "user_rejected",
              "error": "the user said no"})
        send({"type": "message.completed", "text": "decision: " + decision["decision"]})
        end()
        return
    if text == "messy":
        send({"type": "step_start", "stepId": "s1"})
        send({"type": "ToolCall", "name": "grep", "args": {"q": "x"}})
        send({"type": "tool_result", "result": 3})
        send({"type": "agent:thought", "text": "hm"})
        send({"type": "message.completed", "messageId": "summary", "text": "messy done"})
        end()
        return
    send({"type": "message.completed", "text": "fine: " + text})
    end()


if __name__ == "__main__":
    main()
