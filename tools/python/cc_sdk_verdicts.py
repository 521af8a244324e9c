"""Cross-validator: the ChainlessChain SDK's own validator over NDJSON instances.

usage: python cc_sdk_verdicts.py <definition|-> <instances.ndjson>

Without a definition each instance goes through ``validate_protocol_message`` (the whole
protocol); with one, through ``validate_protocol_definition(name, value)``. Both return
``(ok, errors)`` where every error reads ``"#/path message"``. Each output line is
``{"valid": bool, "errors": [{"instancePath": "/path", "message": "..."}]}``, in the SDK's order.
The SDK points a missing required property at the property itself (``/a/b is required``).
"""

from __future__ import annotations

import json
import sys

from chainlesschain_agent_sdk import generated_app_protocol as protocol


def split_error(text: str) -> dict[str, str]:
    location, _, message = text.partition(" ")
    path = location[1:] if location.startswith("#") else location
    return {"instancePath": path, "message": message}


def main(argv: list[str]) -> None:
    if len(argv) != 2:
        sys.stderr.write("usage: cc_sdk_verdicts.py <definition|-> <instances.ndjson>\n")
        sys.exit(2)
    definition, instances_path = argv
    if definition != "-" and definition not in protocol.CC_AGENT_PROTOCOL_SCHEMA.get("$defs", {}):
        sys.stderr.write(f"cc-sdk-verdicts: unknown protocol definition {json.dumps(definition)}\n")
        sys.exit(2)
    out = []
    with open(instances_path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            instance = json.loads(line)
            if definition == "-":
                ok, errors = protocol.validate_protocol_message(instance)
            else:
                ok, errors = protocol.validate_protocol_definition(definition, instance)
            out.append(json.dumps({"valid": ok, "errors": [split_error(e) for e in errors]}))
    sys.stdout.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    main(sys.argv[1:])
