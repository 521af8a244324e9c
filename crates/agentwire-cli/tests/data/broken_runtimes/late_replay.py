"""Breaks the resume barrier: answers runtime.events.resume first and writes the replayed events
after the answer."""

import roll_runtime


class LateReplay(roll_runtime.Runtime):
    def resume(self, request_id, params):
        thread = self.thread(params)
        start = self.resume_after(thread, params.get("afterCursor"))
        self.write({"jsonrpc": "2.0", "id": request_id, "result": self.barrier(thread, start)})
        self.replay(thread, start)
        return None

    def handle(self, message):
        if message.get("method") == "runtime.events.resume":
            try:
                self.resume(message.get("id"), message.get("params") or {})
            except roll_runtime.RollError as error:
                self.error(message.get("id"), error)
            return
        super().handle(message)


if __name__ == "__main__":
    roll_runtime.main(LateReplay)
