"""Breaks the ACK barrier: sends approval.request as soon as a turn asks, before the client's
client.capabilities.set."""

import roll_runtime


class EarlyApproval(roll_runtime.Runtime):
    def run_turn(self, thread, turn_id, text):
        if text.startswith("/approve ") and not self.acked:
            # Pretend the capability was already granted.
            self.accepted = ["approval.request"]
        super().run_turn(thread, turn_id, text)


if __name__ == "__main__":
    roll_runtime.main(EarlyApproval)
