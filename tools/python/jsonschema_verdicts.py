"""Cross-validator: validates NDJSON instances with Python jsonschema, one verdict per line.

usage: python jsonschema_verdicts.py <schema.json> <definition|-> <instances.ndjson>

The validator class comes from the schema's ``$schema`` (Draft7Validator, Draft201909Validator,
Draft202012Validator). Formats are checked with ``jsonschema.FormatChecker()``, which knows every
format of every draft (the ``format-nongpl`` extra provides date-time, uri, email, uuid and
more), as ajv-formats does: a draft-07 schema's ``"format": "uuid"`` is checked by both. With a definition name,
instances are validated against ``{"$ref": "#/<$defs|definitions>/<name>"}`` inside the same
document, so that every ``$ref`` resolves as it would from the root. Each output line is
``{"valid": bool, "errors": [{"instancePath": "/a/0", "keyword": "...", "message": "..."}]}``;
the first error is jsonschema's ``best_match``, the rest follow in iteration order.
"""

from __future__ import annotations

import json
import sys
from typing import Any, NoReturn

import jsonschema  # type: ignore[import-untyped]
from jsonschema.exceptions import ValidationError, best_match  # type: ignore[import-untyped]

DRAFTS: dict[str, type[Any]] = {
    "http://json-schema.org/draft-07/schema": jsonschema.Draft7Validator,
    "https://json-schema.org/draft/2019-09/schema": jsonschema.Draft201909Validator,
    "https://json-schema.org/draft/2020-12/schema": jsonschema.Draft202012Validator,
}


def fail(message: str) -> NoReturn:
    sys.stderr.write(f"jsonschema-verdicts: {message}\n")
    sys.exit(2)


def pointer(parts: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in parts)


def definition_schema(root: dict[str, Any], name: str, source: str) -> dict[str, Any]:
    keyword = "$defs" if "$defs" in root else "definitions"
    defs = root.get(keyword)
    if not isinstance(defs, dict) or name not in defs:
        fail(f"definition {json.dumps(name)} not found in {source}")
    wrapper: dict[str, Any] = {"$schema": root["$schema"]}
    if "$id" in root:
        wrapper["$id"] = root["$id"]
    wrapper[keyword] = defs
    wrapper["$ref"] = f"#/{keyword}/" + name.replace("~", "~0").replace("/", "~1")
    return wrapper


def error_json(error: ValidationError) -> dict[str, str]:
    return {
        "instancePath": pointer(error.absolute_path),
        "keyword": str(error.validator),
        "message": error.message,
    }


def main(argv: list[str]) -> None:
    if len(argv) != 3:
        fail("usage: jsonschema_verdicts.py <schema.json> <definition|-> <instances.ndjson>")
    schema_path, definition, instances_path = argv
    with open(schema_path, encoding="utf-8") as handle:
        schema = json.load(handle)
    draft = schema.get("$schema") if isinstance(schema, dict) else None
    validator_class = DRAFTS.get(draft.rstrip("#")) if isinstance(draft, str) else None
    if validator_class is None:
        fail(f"unsupported or missing $schema {json.dumps(draft)} in {schema_path}")
    if definition != "-":
        schema = definition_schema(schema, definition, schema_path)
    validator = validator_class(schema, format_checker=jsonschema.FormatChecker())
    out = []
    with open(instances_path, encoding="utf-8") as handle:
        for line in handle:
            if not line.strip():
                continue
            instance = json.loads(line)
            errors = list(validator.iter_errors(instance))
            if errors:
                best = best_match(errors)
                errors = [best] + [e for e in errors if e is not best]
            out.append(json.dumps({"valid": not errors, "errors": [error_json(e) for e in errors]}))
    sys.stdout.write("".join(line + "\n" for line in out))


if __name__ == "__main__":
    main(sys.argv[1:])
