"""Hangs: starts, reads nothing and writes nothing."""

import time

time.sleep(3600)
