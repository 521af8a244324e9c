class ValidationError(NamedTuple):
    """One reason a value does not match the schema."""

    instance_path: str
    """JSON Pointer of the offending value ("" for the value itself); a missing property is reported at its object."""
    keyword: str
    """The schema keyword that failed (type, required, oneOf, ...)."""
    message: str
    """A sentence saying what is wrong."""


class ValidationResult(NamedTuple):
    """The verdict of a validator: ok when errors is empty."""

    ok: bool
    errors: Tuple[ValidationError, ...]


class ProtocolValidationError(ValueError):
    """Raised by the assert_* and parse_* functions; carries every error."""

    def __init__(self, errors: Tuple[ValidationError, ...]) -> None:
        super().__init__("; ".join((e.instance_path or "/") + ": " + e.message for e in errors))
        self.errors = errors


MAX_VALIDATION_DEPTH = 256
"""Deepest nesting of schema nodes and values one validation follows; deeper input fails with keyword maxDepth."""

_PATTERNS: Dict[str, "re.Pattern[str]"] = {}
_DAYS = (31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)
_DATE_TIME = re.compile(r"^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}(?::?\d{2})?)\Z")
_DATE = re.compile(r"^(\d{4})-(\d{2})-(\d{2})\Z")
_UUID = re.compile(r"^(?:urn:uuid:)?[0-9a-fA-F]{8}-(?:[0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}\Z")


def _schema_at(pointer: str) -> object:
    node: object = _SCHEMA
    if pointer == "":
        return node
    for raw in pointer[1:].split("/"):
        token = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or token not in node:
            return _MISSING
        node = node[token]
    return node


def _escape(token: str) -> str:
    return token.replace("~", "~0").replace("/", "~1")


def _is_number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _has_type(value: object, expected: object) -> bool:
    if expected == "null":
        return value is None
    if expected == "boolean":
        return isinstance(value, bool)
    if expected == "integer":
        return (isinstance(value, int) and not isinstance(value, bool)) or (isinstance(value, float) and value.is_integer())
    if expected == "number":
        return _is_number(value)
    if expected == "string":
        return isinstance(value, str)
    if expected == "array":
        return isinstance(value, list)
    if expected == "object":
        return isinstance(value, dict)
    return False


def _json_equal(a: object, b: object) -> bool:
    if isinstance(a, bool) or isinstance(b, bool):
        return isinstance(a, bool) and isinstance(b, bool) and a == b
    if _is_number(a) and _is_number(b):
        return a == b
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_json_equal(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return len(a) == len(b) and all(k in b and _json_equal(v, b[k]) for k, v in a.items())
    return type(a) is type(b) and a == b


def _is_date(y: int, m: int, d: int) -> bool:
    if m < 1 or m > 12 or d < 1 or d > _DAYS[m - 1]:
        return False
    return not (m == 2 and d == 29 and not (y % 4 == 0 and (y % 100 != 0 or y % 400 == 0)))


def _check_format(fmt: str, text: str) -> bool:
    if fmt == "date-time":
        m = _DATE_TIME.match(text)
        return m is not None and _is_date(int(m.group(1)), int(m.group(2)), int(m.group(3))) and int(m.group(4)) <= 23 and int(m.group(5)) <= 59 and int(m.group(6)) <= 60
    if fmt == "date":
        m = _DATE.match(text)
        return m is not None and _is_date(int(m.group(1)), int(m.group(2)), int(m.group(3)))
    if fmt == "uuid":
        return _UUID.match(text) is not None
    # Formats this validator does not know are annotations.
    return True


def _matches(pattern: str, text: str) -> bool:
    compiled = _PATTERNS.get(pattern)
    if compiled is None:
        compiled = re.compile(pattern)
        _PATTERNS[pattern] = compiled
    return compiled.search(text) is not None


def _walk(value: object, node: object, path: str, errors: List[ValidationError], depth: int) -> None:
    if node is True or node is _MISSING:
        return
    if node is False:
        errors.append(ValidationError(path, "false", "no value is allowed here"))
        return
    if not isinstance(node, dict):
        return
    if depth > MAX_VALIDATION_DEPTH:
        errors.append(ValidationError(path, "maxDepth", "nesting is deeper than " + str(MAX_VALIDATION_DEPTH)))
        return
    ref = node.get("$ref")
    if isinstance(ref, str):
        target = _schema_at(unquote(ref[1:])) if ref.startswith("#") else _MISSING
        if target is _MISSING:
            errors.append(ValidationError(path, "$ref", "unresolved schema reference " + ref))
        else:
            _walk(value, target, path, errors, depth + 1)
        if _DRAFT_07:
            return
    if "const" in node and not _json_equal(value, node["const"]):
        errors.append(ValidationError(path, "const", "must equal " + json.dumps(node["const"])))
    enum = node.get("enum")
    if isinstance(enum, list) and not any(_json_equal(value, v) for v in enum):
        errors.append(ValidationError(path, "enum", "must be one of the allowed values"))
    all_of = node.get("allOf")
    if isinstance(all_of, list):
        for part in all_of:
            _walk(value, part, path, errors, depth + 1)
    for keyword in ("oneOf", "anyOf"):
        branches = node.get(keyword)
        if not isinstance(branches, list):
            continue
        matches = 0
        for branch in branches:
            sub: List[ValidationError] = []
            _walk(value, branch, path, sub, depth + 1)
            if not sub:
                matches += 1
        if keyword == "oneOf" and matches != 1:
            errors.append(ValidationError(path, "oneOf", "must match exactly one branch (" + str(matches) + " match)"))
        if keyword == "anyOf" and matches == 0:
            errors.append(ValidationError(path, "anyOf", "must match at least one branch"))
    if "not" in node:
        sub = []
        _walk(value, node["not"], path, sub, depth + 1)
        if not sub:
            errors.append(ValidationError(path, "not", "must not match the schema under not"))
    if "if" in node:
        sub = []
        _walk(value, node["if"], path, sub, depth + 1)
        branch_node = node.get("then" if not sub else "else", _MISSING)
        _walk(value, branch_node, path, errors, depth + 1)
    raw_types = node.get("type")
    types = raw_types if isinstance(raw_types, list) else [raw_types] if isinstance(raw_types, str) else []
    if types and not any(_has_type(value, t) for t in types):
        errors.append(ValidationError(path, "type", "must be " + " or ".join(str(t) for t in types)))
        return
    if isinstance(value, str):
        length = len(value)
        min_length = node.get("minLength")
        if _is_number(min_length) and length < cast(float, min_length):
            errors.append(ValidationError(path, "minLength", "must have at least " + str(min_length) + " characters"))
        max_length = node.get("maxLength")
        if _is_number(max_length) and length > cast(float, max_length):
            errors.append(ValidationError(path, "maxLength", "must have at most " + str(max_length) + " characters"))
        pattern = node.get("pattern")
        if isinstance(pattern, str) and not _matches(pattern, value):
            errors.append(ValidationError(path, "pattern", "must match the pattern " + pattern))
        fmt = node.get("format")
        if isinstance(fmt, str) and not _check_format(fmt, value):
            errors.append(ValidationError(path, "format", "must be a " + fmt))
    if _is_number(value):
        number = cast(float, value)
        for keyword, text in (("minimum", ">= "), ("maximum", "<= "), ("exclusiveMinimum", "> "), ("exclusiveMaximum", "< ")):
            bound = node.get(keyword)
            if not _is_number(bound):
                continue
            limit = cast(float, bound)
            if (
                (keyword == "minimum" and number < limit)
                or (keyword == "maximum" and number > limit)
                or (keyword == "exclusiveMinimum" and number <= limit)
                or (keyword == "exclusiveMaximum" and number >= limit)
            ):
                errors.append(ValidationError(path, keyword, "must be " + text + str(bound)))
        step = node.get("multipleOf")
        if _is_number(step) and cast(float, step) > 0:
            quotient = number / cast(float, step)
            if quotient != quotient or quotient in (float("inf"), float("-inf")) or quotient != round(quotient):
                errors.append(ValidationError(path, "multipleOf", "must be a multiple of " + str(step)))
    if isinstance(value, list):
        min_items = node.get("minItems")
        if _is_number(min_items) and len(value) < cast(float, min_items):
            errors.append(ValidationError(path, "minItems", "must have at least " + str(min_items) + " items"))
        max_items = node.get("maxItems")
        if _is_number(max_items) and len(value) > cast(float, max_items):
            errors.append(ValidationError(path, "maxItems", "must have at most " + str(max_items) + " items"))
        if node.get("uniqueItems") is True:
            done = False
            for i in range(len(value)):
                for j in range(i + 1, len(value)):
                    if _json_equal(value[i], value[j]):
                        errors.append(ValidationError(path, "uniqueItems", "items " + str(i) + " and " + str(j) + " are equal"))
                        done = True
                        break
                if done:
                    break
        prefix = node.get("prefixItems")
        items = node.get("items", _MISSING)
        if isinstance(prefix, list):
            tuple_schemas: Optional[List[object]] = prefix
            rest = items
        elif isinstance(items, list):
            tuple_schemas = items
            rest = node.get("additionalItems", _MISSING)
        else:
            tuple_schemas = None
            rest = items
        for i, item in enumerate(value):
            schema = tuple_schemas[i] if tuple_schemas is not None and i < len(tuple_schemas) else rest
            _walk(item, schema, path + "/" + str(i), errors, depth + 1)
        if "contains" in node:
            count = 0
            for item in value:
                sub = []
                _walk(item, node["contains"], path, sub, depth + 1)
                if not sub:
                    count += 1
            min_contains = node.get("minContains", 1)
            if _is_number(min_contains) and count < cast(float, min_contains):
                errors.append(ValidationError(path, "contains", "must contain at least " + str(min_contains) + " matching items"))
            max_contains = node.get("maxContains")
            if _is_number(max_contains) and count > cast(float, max_contains):
                errors.append(ValidationError(path, "maxContains", "must contain at most " + str(max_contains) + " matching items"))
    if isinstance(value, dict):
        properties = node.get("properties")
        if not isinstance(properties, dict):
            properties = {}
        required = node.get("required")
        if isinstance(required, list):
            for name in required:
                if name not in value:
                    errors.append(ValidationError(path, "required", "the property " + json.dumps(name) + " is required"))
        for name, schema in properties.items():
            if name in value:
                _walk(value[name], schema, path + "/" + _escape(name), errors, depth + 1)
        patterns = node.get("patternProperties")
        pattern_items = list(patterns.items()) if isinstance(patterns, dict) else []
        additional = node.get("additionalProperties", _MISSING)
        for key, child in value.items():
            at = path + "/" + _escape(key)
            matched = key in properties
            for pattern_text, schema in pattern_items:
                if _matches(pattern_text, key):
                    matched = True
                    _walk(child, schema, at, errors, depth + 1)
            if matched or additional is _MISSING:
                continue
            if additional is False:
                errors.append(ValidationError(at, "additionalProperties", "the property " + json.dumps(key) + " is not allowed"))
            else:
                _walk(child, additional, at, errors, depth + 1)
        if "propertyNames" in node:
            for key in value:
                _walk(key, node["propertyNames"], path + "/" + _escape(key), errors, depth + 1)
        min_props = node.get("minProperties")
        if _is_number(min_props) and len(value) < cast(float, min_props):
            errors.append(ValidationError(path, "minProperties", "must have at least " + str(min_props) + " properties"))
        max_props = node.get("maxProperties")
        if _is_number(max_props) and len(value) > cast(float, max_props):
            errors.append(ValidationError(path, "maxProperties", "must have at most " + str(max_props) + " properties"))
        dependent = node.get("dependentRequired")
        if isinstance(dependent, dict):
            for key, names in dependent.items():
                if key in value and isinstance(names, list):
                    for name in names:
                        if name not in value:
                            errors.append(ValidationError(path, "dependentRequired", "the property " + json.dumps(name) + " is required when " + json.dumps(key) + " is present"))


def validate_at(pointer: str, value: object) -> ValidationResult:
    """Validates value against the schema node at pointer (a JSON Pointer into the embedded schema)."""
    node = _schema_at(pointer)
    if node is _MISSING:
        return ValidationResult(False, (ValidationError("", "$ref", "the schema has no node at " + pointer),))
    errors: List[ValidationError] = []
    _walk(value, node, "", errors, 0)
    return ValidationResult(not errors, tuple(errors))


def validate_protocol_message(value: object) -> ValidationResult:
    """Validates a whole message against the document root."""
    return validate_at("", value)


def validate_definition(name: str, value: object) -> ValidationResult:
    """Validates value against the definition name."""
    definitions = cast(Dict[str, object], _SCHEMA).get(_DEFINITIONS_KEY)
    if not isinstance(definitions, dict) or name not in definitions:
        return ValidationResult(False, (ValidationError("", "$ref", "unknown definition " + json.dumps(name)),))
    return validate_at("/" + _DEFINITIONS_KEY + "/" + _escape(name), value)


def _assert_valid(result: ValidationResult) -> None:
    if not result.ok:
        raise ProtocolValidationError(result.errors)
