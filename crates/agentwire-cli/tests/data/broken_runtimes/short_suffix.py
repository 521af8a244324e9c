"""Breaks expiry: after the log's start was trimmed, a resume from null replays what is left (a
shorter suffix) instead of answering EVENT_CURSOR_EXPIRED."""

import roll_runtime


class ShortSuffix(roll_runtime.Runtime):
    def resume_after(self, thread, after):
        if after is None:
            return self.low_watermark(thread)
        return super().resume_after(thread, after)


if __name__ == "__main__":
    roll_runtime.main(ShortSuffix)
