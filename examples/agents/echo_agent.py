#!/usr/bin/env python3
"""An example agent speaking agentwire's agent protocol (docs/agent.md).

Run it under the runtime with `agentwire serve --agent-cmd 'python3 examples/agents/echo_agent.py'`.
It reads one `turn.start` on standard input, writes its work on standard output (one JSON object
per line), and ends the turn with `turn.end`:

- `/shell COMMAND`: calls the tool `shell` after asking the host to approve it. The example does
  not run commands: an approved one is echoed back as its output.
- `/ask QUESTION`: asks the host a question with a one-field form and quotes the answer.
- anything else: replies `echo: <text>`, streamed word by word.

The typed messages come from the generated Python bindings of the protocol
(`protocols/agent/generated/py/agent.py`); an agent outside this repository copies that file
next to itself.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import List, Union

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "protocols" / "agent" / "generated" / "py"))

import agent as protocol  # noqa: E402

STEP = "step-1"


class Cancelled(Exception):
    """The runtime sent `turn.cancel`."""


def send(message: protocol.AgentMessage) -> None:
    """Writes one message as one line and flushes it: the runtime reads lines as they come."""
    sys.stdout.write(json.dumps(message) + "\n")
    sys.stdout.flush()


def receive() -> protocol.RuntimeMessage:
    """The next message from the runtime; messages of a newer protocol are skipped."""
    while True:
        line = sys.stdin.readline()
        if not line:
            raise Cancelled("the runtime closed standard input")
        if not line.strip():
            continue
        message = protocol.parse_runtime_message(json.loads(line))
        if isinstance(message, protocol.UnknownRuntimeMessage):
            continue
        if message["type"] == "turn.cancel":
            raise Cancelled(message.get("reason", "cancelled"))
        return message


def reply(text: str) -> None:
    """Streams `text` word by word, then completes the message."""
    words = text.split(" ")
    for i, word in enumerate(words):
        delta: protocol.MessageDelta = {
            "type": "message.delta",
            "delta": word if i == len(words) - 1 else word + " ",
        }
        send(delta)
    completed: protocol.MessageCompleted = {"type": "message.completed", "text": text}
    send(completed)


def await_decision(request_id: str) -> protocol.ApprovalDecision:
    while True:
        message = receive()
        if message["type"] == "approval.decision" and message["requestId"] == request_id:
            return message


def await_answer(request_id: str) -> protocol.InputResult:
    while True:
        message = receive()
        if message["type"] == "input.result" and message["requestId"] == request_id:
            return message


def shell(command: str) -> None:
    call: protocol.ToolCall = {
        "type": "tool:call",
        "stepId": STEP,
        "callId": "call-1",
        "name": "shell",
        "args": {"command": command},
    }
    send(call)
    ask: protocol.ApprovalRequest = {
        "type": "approval.request",
        "requestId": "approval-1",
        "callId": "call-1",
        "toolName": "shell",
        "preview": {"command": command, "explanation": "Echoes the command; the example agent runs nothing."},
        "reason": "shell commands need the user's approval",
    }
    send(ask)
    decision = await_decision("approval-1")
    if decision["decision"] == "approve":
        output: protocol.ToolOutput = {"type": "tool.output", "callId": "call-1", "delta": f"$ {command}\n"}
        send(output)
        result: protocol.ToolResult = {
            "type": "tool:result",
            "callId": "call-1",
            "ok": True,
            "result": {"echoed": command},
            "display": {"text": f"$ {command}"},
        }
        send(result)
        reply(f"Echoed `{command}`.")
    else:
        # The runtime records the call as refused, whatever this result says.
        refused: protocol.ToolResult = {
            "type": "tool:result",
            "callId": "call-1",
            "ok": False,
            "error": f"not approved ({decision['decision']})",
        }
        send(refused)
        reply(f"Did not run `{command}`.")


def ask(question: str) -> None:
    controls: List[protocol.InputControl] = [
        {"type": "text", "id": "answer", "label": question[:200] or "Your answer", "required": True}
    ]
    form: protocol.InputRequest = {
        "type": "input.request",
        "requestId": "form-1",
        "title": "A question from the example agent",
        "controls": controls,
    }
    send(form)
    answer = await_answer("form-1")
    if answer["status"] == "submitted":
        values = [str(v["value"]) for v in answer.get("values", [])]
        reply("You answered: " + ", ".join(values))
    else:
        reply(f"No answer ({answer['status']}).")


def main() -> int:
    start = receive()
    if start["type"] != "turn.start":
        return 2
    text = start["input"]["text"]
    run_start: protocol.RunStart = {"type": "run:start", "agent": "echo", "goal": text}
    send(run_start)
    step: protocol.StepStart = {"type": "step:start", "stepId": STEP, "title": "Answer"}
    send(step)
    end: Union[protocol.TurnEnd, None] = None
    try:
        if text.startswith("/shell "):
            shell(text[len("/shell "):].strip())
        elif text.startswith("/ask "):
            ask(text[len("/ask "):].strip())
        else:
            reply(f"echo: {text}")
        done: protocol.StepDone = {"type": "step:done", "stepId": STEP}
        send(done)
        end = {"type": "turn.end", "status": "completed"}
    except Cancelled as why:
        end = {"type": "turn.end", "status": "failed", "message": f"stopped: {why}"}
    send(end)
    return 0


if __name__ == "__main__":
    sys.exit(main())
