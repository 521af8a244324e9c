"""A small Roll runtime serving protocol 1.3 on stdio, in memory, for the conformance tests.

It keeps the promises the conformance suite checks for the scenarios it serves (negotiation,
capabilities, the ACK barrier, the thread and turn methods, resume with its barrier and expiry,
recovery snapshots, approvals). Each broken runtime next to it overrides one method of
`Runtime` to break one promise.

Turn inputs, like the demo agent's: plain text is echoed; `/tool NAME JSON` runs one tool;
`/approve COMMAND` asks approval to run a shell command; `/burst N` runs N tools.

`--trim-dir DIR`: a file named after a thread in DIR means the thread's log was trimmed to its
newest event (the trim hook of the tests creates it).
"""

import datetime
import json
import os
import re
import sys
import uuid

VERSION = "1.3"
CURSOR = re.compile(r"^rte1:([0-9a-fA-F-]{36}):(0|[1-9][0-9]*):([0-9a-fA-F-]{36})$")
REGISTRY = ["approval.request", "userInput.request"]
METHODS_1_3 = {
    "initialize", "client.capabilities.set", "thread.list", "thread.create", "thread.rename",
    "thread.delete", "thread.detach", "thread.open", "thread.snapshot", "thread.capabilities",
    "operation.get", "turn.start", "turn.cancel", "approval.respond", "runtime.events.resume",
}


def now(later_seconds=0):
    moment = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(seconds=later_seconds)
    return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")


class RollError(Exception):
    def __init__(self, roll_code, message, code=-32000):
        super().__init__(message)
        self.roll_code = roll_code
        self.code = code


def invalid(message):
    return RollError("INVALID_PARAMS", message, -32602)


class Thread:
    def __init__(self, title):
        self.id = str(uuid.uuid4())
        self.log_id = str(uuid.uuid4())
        self.title = title
        self.created = now()
        self.updated = self.created
        self.events = []  # durable envelopes without protocol-local fields
        self.messages = []
        self.operations = []
        self.active = None  # {"id", "startedAt", "approval"}


class Runtime:
    def __init__(self, trim_dir=None):
        self.instance = str(uuid.uuid4())
        self.trim_dir = trim_dir
        self.version = None
        self.revision = 0
        self.requested = None
        self.accepted = []
        self.acked = False
        self.threads = {}
        self.order = []
        self.sequence = 0
        self.server_ids = 0
        self.waiting = {}  # JSON-RPC id of a server request -> thread

    # --- output -------------------------------------------------------------------------
    def write(self, message):
        sys.stdout.write(json.dumps(message) + "\n")
        sys.stdout.flush()

    def notify(self, method, params):
        self.write({"jsonrpc": "2.0", "method": method, "params": params})

    def envelope(self, thread, stored):
        self.sequence += 1
        return {
            "protocolVersion": VERSION,
            "runtimeInstanceId": self.instance,
            "sequence": self.sequence,
            "timestamp": stored["timestamp"],
            "threadId": thread.id,
            "turnId": stored["turnId"],
            "event": stored["event"],
            "durability": "durable",
            "eventId": stored["eventId"],
            "cursor": stored["cursor"],
        }

    def emit(self, thread, turn_id, event):
        event_id = str(uuid.uuid4())
        stored = {
            "timestamp": now(),
            "turnId": turn_id,
            "event": event,
            "eventId": event_id,
            "cursor": "rte1:%s:%d:%s" % (thread.log_id, len(thread.events), event_id),
        }
        thread.events.append(stored)
        thread.updated = stored["timestamp"]
        self.notify("runtime.event", self.envelope(thread, stored))

    # --- views --------------------------------------------------------------------------
    def summary(self, thread):
        return {
            "id": thread.id,
            "title": thread.title,
            "createdAt": thread.created,
            "updatedAt": thread.updated,
            "messageCount": len(thread.messages),
        }

    def page(self, items, before, limit):
        kept = [i for i in items if before is None or i["sequence"] < before]
        chosen = kept[-limit:]
        older = len(kept) > len(chosen)
        return {"items": chosen, "nextBeforeSequence": chosen[0]["sequence"] if older else None}

    def pending_approvals(self, thread):
        active = thread.active
        if not active or not active.get("approval"):
            return []
        return [active["approval"]["view"]]

    def pending_interactions(self, thread):
        active = thread.active
        if not active or not active.get("approval"):
            return []
        approval = active["approval"]
        return [{
            "method": "approval.request",
            "interactionId": approval["interactionId"],
            "threadId": thread.id,
            "turnId": active["id"],
            "expiresAt": approval["expiresAt"],
            "sensitivity": "normal",
            "approvalId": approval["view"]["id"],
        }]

    def snapshot(self, thread, params):
        limit = params.get("limit", 100)
        if not isinstance(limit, int) or isinstance(limit, bool) or not 1 <= limit <= 500:
            raise invalid("limit must be 1 to 500")
        cursor = thread.events[-1]["cursor"] if thread.events else None
        empty = {"items": [], "nextBeforeSequence": None}
        if params.get("recovery") is True:
            result = {
                "thread": self.summary(thread),
                "messages": empty,
                "operations": empty,
                "pendingApprovals": [],
                "pendingInteractions": [],
                "transcriptCompleteness": "complete",
                "eventCursor": cursor,
                "recoveryProjection": True,
            }
        else:
            result = {
                "thread": self.summary(thread),
                "messages": self.page(thread.messages, params.get("messageBeforeSequence"), limit),
                "operations": self.page(
                    thread.operations, params.get("operationBeforeSequence"), limit
                ),
                "pendingApprovals": self.pending_approvals(thread),
                "pendingInteractions": self.pending_interactions(thread),
                "transcriptCompleteness": "complete",
                "eventCursor": cursor,
            }
        if thread.active:
            result["activeTurn"] = {
                "id": thread.active["id"],
                "status": "running",
                "startedAt": thread.active["startedAt"],
            }
        return result

    # --- turns --------------------------------------------------------------------------
    def add_message(self, thread, role, text):
        thread.messages.append({
            "sequence": len(thread.messages),
            "role": role,
            "createdAt": now(),
            "parts": [{"type": "text", "text": text}],
        })

    def tool(self, thread, turn_id, name, tool_input, outcome="success"):
        operation_id = str(uuid.uuid4())
        call_id = "%s:call-%d" % (turn_id, len(thread.operations))
        thread.operations.append({
            "id": operation_id,
            "sequence": len(thread.operations),
            "toolCallId": call_id,
            "agentName": "mini",
            "toolName": name,
            "createdAt": now(),
            "outcome": {"kind": outcome},
            "display": {"text": "%s ran" % name},
        })
        self.emit(thread, turn_id, {
            "type": "tool.completed",
            "toolCallId": call_id,
            "agentName": "mini",
            "toolName": name,
            "operationId": operation_id,
            "outcome": {"kind": outcome},
            "display": {"text": "%s ran" % name, "input": tool_input},
        })

    def reply(self, thread, turn_id, text):
        self.add_message(thread, "assistant", text)
        self.emit(thread, turn_id, {
            "type": "message.completed", "streamId": str(uuid.uuid4()), "text": text,
        })

    def end(self, thread, turn_id, event):
        thread.active = None
        self.emit(thread, turn_id, event)

    def run_turn(self, thread, turn_id, text):
        thread.active = {"id": turn_id, "startedAt": now(), "approval": None}
        self.add_message(thread, "user", text)
        self.emit(thread, turn_id, {"type": "turn.started"})
        if text.startswith("/approve "):
            view = {
                "id": str(uuid.uuid4()),
                "turnId": turn_id,
                "agentName": "mini",
                "toolName": "shell",
                "preview": {"command": text[len("/approve "):]},
            }
            thread.active["approval"] = {
                "view": view,
                "interactionId": str(uuid.uuid4()),
                "expiresAt": now(300),
                "sent": None,
            }
            if "approval.request" in self.accepted:
                self.ask(thread)
            self.emit(thread, turn_id, {"type": "approval.required", "approval": view})
            return
        if text.startswith("/tool "):
            parts = text.split(" ", 2)
            self.tool(thread, turn_id, parts[1], json.loads(parts[2]) if len(parts) > 2 else {})
            self.reply(thread, turn_id, "The tool %s ran." % parts[1])
        elif text.startswith("/burst "):
            for index in range(int(text.split(" ")[1])):
                self.tool(thread, turn_id, "burst-%d" % index, {})
        else:
            self.reply(thread, turn_id, "echo: " + text)
        self.end(thread, turn_id, {"type": "turn.completed"})

    def ask(self, thread):
        approval = thread.active["approval"]
        self.server_ids += 1
        request_id = "runtime:%d" % self.server_ids
        approval["sent"] = request_id
        self.waiting[request_id] = thread
        self.write({
            "jsonrpc": "2.0",
            "id": request_id,
            "method": "approval.request",
            "params": {
                "interactionId": approval["interactionId"],
                "threadId": thread.id,
                "turnId": thread.active["id"],
                "expiresAt": approval["expiresAt"],
                "sensitivity": "normal",
                "approval": approval["view"],
            },
        })

    def answered(self, request_id, result):
        thread = self.waiting.pop(request_id, None)
        if thread is None or not thread.active or not thread.active.get("approval"):
            return
        turn_id = thread.active["id"]
        approval = thread.active["approval"]
        decision = (result or {}).get("decision")
        if decision not in ("approve", "reject"):
            resolution = {"status": "cancelled", "reason": "invalid answer"}
        elif decision == "approve":
            resolution = {"status": "resolved", "decision": "approve"}
        else:
            resolution = {"status": "resolved", "decision": "reject"}
        thread.active["approval"] = None
        self.emit(thread, turn_id, {
            "type": "approval.resolved",
            "approvalId": approval["view"]["id"],
            "resolution": resolution,
        })
        command = approval["view"]["preview"]["command"]
        if decision == "approve":
            self.tool(thread, turn_id, "shell", {"command": command})
            self.reply(thread, turn_id, "Ran `%s`." % command)
        else:
            self.tool(thread, turn_id, "shell", {"command": command}, "user_rejected")
            self.reply(thread, turn_id, "Did not run `%s`." % command)
        self.end(thread, turn_id, {"type": "turn.completed"})

    # --- methods ------------------------------------------------------------------------
    def thread(self, params):
        thread = self.threads.get(params.get("threadId"))
        if thread is None:
            raise RollError("THREAD_NOT_FOUND", "no such thread")
        return thread

    def trimmed(self, thread):
        return bool(self.trim_dir) and os.path.exists(os.path.join(self.trim_dir, thread.id))

    def low_watermark(self, thread):
        return max(len(thread.events) - 1, 0) if self.trimmed(thread) else 0

    def replay(self, thread, start):
        for stored in thread.events[start:]:
            self.notify("runtime.event", self.envelope(thread, stored))

    def resume_after(self, thread, after):
        """Where a resume starts, or an error."""
        if after is None:
            if self.low_watermark(thread) > 0:
                raise RollError("EVENT_CURSOR_EXPIRED", "the start of the log was trimmed")
            return 0
        match = CURSOR.match(after) if isinstance(after, str) else None
        if not match:
            raise invalid("afterCursor is not a cursor")
        log_id, seq, event_id = match.group(1), int(match.group(2)), match.group(3)
        if log_id != thread.log_id or seq >= len(thread.events):
            raise RollError("EVENT_CURSOR_GAP", "the cursor is not part of this thread's log")
        if thread.events[seq]["eventId"] != event_id:
            raise RollError("EVENT_CURSOR_GAP", "the cursor names another event")
        if seq + 1 < self.low_watermark(thread):
            raise RollError("EVENT_CURSOR_EXPIRED", "events after the cursor were trimmed")
        return seq + 1

    def resume(self, request_id, params):
        thread = self.thread(params)
        start = self.resume_after(thread, params.get("afterCursor"))
        self.replay(thread, start)
        return self.barrier(thread, start)

    def barrier(self, thread, start):
        return {
            "throughCursor": thread.events[-1]["cursor"] if thread.events else None,
            "replayedCount": len(thread.events) - start,
        }

    def set_capabilities(self, params):
        revision = params.get("revision")
        methods = params.get("serverRequestMethods")
        if not isinstance(revision, int) or revision < 1 or not isinstance(methods, list):
            raise invalid("revision must be at least 1")
        if len(set(methods)) != len(methods):
            raise invalid("duplicate methods")
        if revision < self.revision or (revision == self.revision and set(methods) != self.requested):
            raise RollError("CAPABILITY_REVISION_CONFLICT", "stale revision")
        self.revision = revision
        self.requested = set(methods)
        self.accepted = [m for m in REGISTRY if m in methods]
        self.acked = True
        return {"revision": revision, "acceptedServerRequestMethods": self.accepted}

    def after_ack(self):
        if "approval.request" not in self.accepted:
            return
        for thread in self.threads.values():
            active = thread.active
            if active and active.get("approval") and not active["approval"]["sent"]:
                self.ask(thread)

    def call(self, method, params, request_id):
        if method not in METHODS_1_3:
            raise RollError(None, "method %s does not exist in protocol 1.3" % method, -32601)
        if self.version is None and method != "initialize":
            raise RollError("INITIALIZE_REQUIRED", "initialize must be the first call")
        if method == "initialize":
            if self.version is not None:
                raise RollError("CAPABILITY_UNAVAILABLE", "initialize was already called")
            offered = params.get("protocolVersions") or []
            if VERSION not in offered:
                raise RollError("PROTOCOL_VERSION_UNSUPPORTED", "no common version")
            self.version = VERSION
            return {
                "protocolVersion": VERSION,
                "runtimeInstanceId": self.instance,
                "server": {"name": "mini", "version": "1.0.0", "runtimeVersion": "1.0.0"},
                "features": ["thread-management", "snapshots", "turns", "approvals"],
                "limits": {
                    "maxFrameBytes": 4194304,
                    "maxPageSize": 500,
                    "eventReplay": True,
                    "idempotencyCacheEntries": 10000,
                },
            }
        if method == "client.capabilities.set":
            return self.set_capabilities(params)
        if method == "thread.list":
            limit = params.get("limit", 100)
            if not isinstance(limit, int) or not 1 <= limit <= 500:
                raise invalid("limit must be 1 to 500")
            start = int(params.get("cursor", "0"))
            ids = self.order[start:start + limit]
            more = start + limit < len(self.order)
            return {
                "items": [self.summary(self.threads[i]) for i in ids],
                "nextCursor": str(start + limit) if more else None,
            }
        if method == "thread.create":
            thread = Thread(params.get("title", "").strip() or "untitled")
            self.threads[thread.id] = thread
            self.order.append(thread.id)
            return {"thread": self.summary(thread)}
        if method == "thread.rename":
            thread = self.thread(params)
            title = params.get("title", "").strip()
            if not title:
                raise invalid("a title has 1 to 200 characters")
            thread.title = title
            return {"thread": self.summary(thread)}
        if method == "thread.delete":
            thread = self.thread(params)
            del self.threads[thread.id]
            self.order.remove(thread.id)
            return {"deleted": True}
        if method == "thread.detach":
            self.thread(params)
            return {"detached": True}
        if method == "thread.open":
            return self.snapshot(self.thread(params), {"limit": 100})
        if method == "thread.snapshot":
            return self.snapshot(self.thread(params), params)
        if method == "thread.capabilities":
            return self.capabilities(self.thread(params))
        if method == "operation.get":
            thread = self.thread(params)
            found = [o for o in thread.operations if o["id"] == params.get("operationId")]
            return {"operation": found[0] if found else None}
        if method == "turn.start":
            thread = self.thread(params)
            if thread.active:
                raise RollError("TURN_ALREADY_ACTIVE", "a turn is active")
            text = params.get("input", {}).get("text", "")
            return ("turn", thread, params["turnId"], text)
        if method == "turn.cancel":
            thread = self.thread(params)
            if not thread.active or thread.active["id"] != params.get("turnId"):
                raise RollError("TURN_NOT_FOUND", "no such active turn")
            return ("cancel", thread)
        if method == "approval.respond":
            raise RollError("CAPABILITY_UNAVAILABLE", "approvals are server requests on 1.1+")
        if method == "runtime.events.resume":
            return self.resume(request_id, params)
        raise RollError(None, "unknown method", -32601)

    def capabilities(self, thread):
        return {"manifest": {"agent": "mini"}}

    def cancel(self, thread):
        turn_id = thread.active["id"]
        approval = thread.active.get("approval")
        if approval:
            if approval["sent"]:
                self.waiting.pop(approval["sent"], None)
                self.notify("runtime.serverRequest.cancel", {
                    "interactionId": approval["interactionId"],
                    "reason": "the turn was cancelled",
                })
            self.emit(thread, turn_id, {
                "type": "approval.resolved",
                "approvalId": approval["view"]["id"],
                "resolution": {"status": "cancelled", "reason": "the turn was cancelled"},
            })
        self.end(thread, turn_id, {
            "type": "turn.cancelled", "reason": "user", "message": "the turn was cancelled",
        })

    # --- the loop -----------------------------------------------------------------------
    def error(self, request_id, error):
        body = {"code": error.code, "message": str(error)}
        if error.roll_code:
            body["data"] = {"rollCode": error.roll_code, "retryable": False}
        self.write({"jsonrpc": "2.0", "id": request_id, "error": body})

    def handle(self, message):
        method = message.get("method")
        request_id = message.get("id")
        if method is None:
            if request_id is not None:
                self.answered(request_id, message.get("result"))
            return
        try:
            result = self.call(method, message.get("params") or {}, request_id)
        except RollError as error:
            self.error(request_id, error)
            return
        except (KeyError, TypeError, ValueError) as error:
            self.error(request_id, invalid(str(error)))
            return
        if isinstance(result, tuple) and result[0] == "turn":
            _, thread, turn_id, text = result
            self.write({"jsonrpc": "2.0", "id": request_id,
                        "result": {"accepted": True, "turnId": turn_id}})
            self.run_turn(thread, turn_id, text)
        elif isinstance(result, tuple) and result[0] == "cancel":
            self.write({"jsonrpc": "2.0", "id": request_id, "result": {"cancelling": True}})
            self.cancel(result[1])
        else:
            self.write({"jsonrpc": "2.0", "id": request_id, "result": result})
            if method == "client.capabilities.set":
                self.after_ack()

    def serve(self):
        for line in sys.stdin:
            line = line.strip()
            if not line:
                continue
            try:
                message = json.loads(line)
            except ValueError:
                continue
            self.handle(message)


def main(runtime_class=Runtime):
    trim_dir = None
    if "--trim-dir" in sys.argv:
        trim_dir = sys.argv[sys.argv.index("--trim-dir") + 1]
    runtime_class(trim_dir).serve()


if __name__ == "__main__":
    main()
