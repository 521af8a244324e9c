"""Writes the ChainlessChain canonical schema and its published digest out of the installed SDK.

usage: python extract_cc_schema.py <out-dir>

Creates ``<out-dir>/cc-agent-protocol.schema.json`` (``CC_AGENT_PROTOCOL_SCHEMA`` as JSON, key
order kept, non-ASCII kept) and ``<out-dir>/cc-agent-protocol.digest`` (``CC_AGENT_PROTOCOL_SCHEMA_DIGEST``).
Both files are written to a temporary name first so that a reader never sees half a file.
"""

from __future__ import annotations

import json
import os
import sys

from chainlesschain_agent_sdk import generated_app_protocol as protocol


def write_atomically(path: str, text: str) -> None:
    temporary = path + ".tmp"
    with open(temporary, "w", encoding="utf-8") as handle:
        handle.write(text)
    os.replace(temporary, path)


def main(argv: list[str]) -> None:
    if len(argv) != 1:
        sys.stderr.write("usage: extract_cc_schema.py <out-dir>\n")
        sys.exit(2)
    out_dir = argv[0]
    os.makedirs(out_dir, exist_ok=True)
    schema_text = json.dumps(protocol.CC_AGENT_PROTOCOL_SCHEMA, ensure_ascii=False)
    write_atomically(os.path.join(out_dir, "cc-agent-protocol.schema.json"), schema_text)
    write_atomically(os.path.join(out_dir, "cc-agent-protocol.digest"), protocol.CC_AGENT_PROTOCOL_SCHEMA_DIGEST)


if __name__ == "__main__":
    main(sys.argv[1:])
