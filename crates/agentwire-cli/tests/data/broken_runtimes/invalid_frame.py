"""Writes an invalid frame: the thread.capabilities result carries a key the strict schema does
not have."""

import roll_runtime


class InvalidFrame(roll_runtime.Runtime):
    def capabilities(self, thread):
        return {"manifest": {"agent": "mini"}, "tools": ["shell"]}


if __name__ == "__main__":
    roll_runtime.main(InvalidFrame)
