/** One reason a value does not match the schema. */
export interface ValidationError {
  /** JSON Pointer of the offending value in the instance (`""` for the value itself); a missing property is reported at its object. */
  instancePath: string;
  /** The schema keyword that failed (`type`, `required`, `oneOf`, ...). */
  keyword: string;
  /** A sentence saying what is wrong. */
  message: string;
}

/** The verdict of a validator: `ok` when `errors` is empty. */
export interface ValidationResult {
  ok: boolean;
  errors: ValidationError[];
}

/** Thrown by the `assert*` functions; carries every error. */
export class ProtocolValidationError extends Error {
  readonly errors: ValidationError[];
  constructor(errors: ValidationError[]) {
    super(errors.map((e) => (e.instancePath === "" ? "/" : e.instancePath) + ": " + e.message).join("; "));
    this.name = "ProtocolValidationError";
    this.errors = errors;
  }
}

/** Deepest nesting of schema nodes and values one validation follows; deeper input fails with keyword `maxDepth`. */
export const MAX_VALIDATION_DEPTH = 256;

const patternCache = new Map<string, RegExp>();

function schemaAt(pointer: string): any {
  let node: any = SCHEMA;
  if (pointer === "") return node;
  for (const raw of pointer.slice(1).split("/")) {
    const token = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || !Object.prototype.hasOwnProperty.call(node, token)) return undefined;
    node = node[token];
  }
  return node;
}

function escapeToken(token: string): string {
  return token.replace(/~/g, "~0").replace(/\//g, "~1");
}

function typeOf(value: unknown): string {
  if (value === null) return "null";
  if (Array.isArray(value)) return "array";
  return typeof value;
}

function hasType(value: unknown, expected: string): boolean {
  switch (expected) {
    case "null": return value === null;
    case "boolean": return typeof value === "boolean";
    case "integer": return typeof value === "number" && Number.isInteger(value);
    case "number": return typeof value === "number" && Number.isFinite(value);
    case "string": return typeof value === "string";
    case "array": return Array.isArray(value);
    case "object": return typeOf(value) === "object";
    default: return false;
  }
}

function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  const ta = typeOf(a);
  if (ta !== typeOf(b)) return false;
  if (ta === "array") {
    const x = a as unknown[];
    const y = b as unknown[];
    return x.length === y.length && x.every((item, i) => jsonEqual(item, y[i]));
  }
  if (ta === "object") {
    const x = a as Record<string, unknown>;
    const y = b as Record<string, unknown>;
    const kx = Object.keys(x);
    if (kx.length !== Object.keys(y).length) return false;
    return kx.every((k) => Object.prototype.hasOwnProperty.call(y, k) && jsonEqual(x[k], y[k]));
  }
  return false;
}

function codePoints(text: string): number {
  let n = 0;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const d = text.charCodeAt(i + 1);
      if (d >= 0xdc00 && d <= 0xdfff) i++;
    }
    n++;
  }
  return n;
}

const DAYS = [31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31];

function isDate(y: number, m: number, d: number): boolean {
  if (m < 1 || m > 12 || d < 1 || d > DAYS[m - 1]) return false;
  return !(m === 2 && d === 29 && !(y % 4 === 0 && (y % 100 !== 0 || y % 400 === 0)));
}

function checkFormat(format: string, text: string): boolean {
  switch (format) {
    case "date-time": {
      const m = /^(\d{4})-(\d{2})-(\d{2})[Tt ](\d{2}):(\d{2}):(\d{2})(\.\d+)?([Zz]|[+-]\d{2}(?::?\d{2})?)$/.exec(text);
      return m !== null && isDate(+m[1], +m[2], +m[3]) && +m[4] <= 23 && +m[5] <= 59 && +m[6] <= 60;
    }
    case "date": {
      const m = /^(\d{4})-(\d{2})-(\d{2})$/.exec(text);
      return m !== null && isDate(+m[1], +m[2], +m[3]);
    }
    case "uuid":
      return /^(?:urn:uuid:)?[0-9a-f]{8}-(?:[0-9a-f]{4}-){3}[0-9a-f]{12}$/i.test(text);
    default:
      // Formats this validator does not know are annotations.
      return true;
  }
}

function matchesPattern(pattern: string, text: string): boolean {
  let re = patternCache.get(pattern);
  if (re === undefined) {
    re = new RegExp(pattern, "u");
    patternCache.set(pattern, re);
  }
  return re.test(text);
}

function walk(value: unknown, node: any, path: string, errors: ValidationError[], depth: number): void {
  const fail = (keyword: string, message: string, at: string = path) => {
    errors.push({ instancePath: at, keyword, message });
  };
  if (node === true || node === undefined) return;
  if (node === false) {
    fail("false", "no value is allowed here");
    return;
  }
  if (depth > MAX_VALIDATION_DEPTH) {
    fail("maxDepth", "nesting is deeper than " + MAX_VALIDATION_DEPTH);
    return;
  }
  if (typeof node.$ref === "string") {
    const ref: string = node.$ref;
    const target = ref.startsWith("#") ? schemaAt(decodeURIComponent(ref.slice(1))) : undefined;
    if (target === undefined) fail("$ref", "unresolved schema reference " + ref);
    else walk(value, target, path, errors, depth + 1);
    if (DRAFT_07) return;
  }
  if ("const" in node && !jsonEqual(value, node.const)) fail("const", "must equal " + JSON.stringify(node.const));
  if (Array.isArray(node.enum) && !node.enum.some((v: unknown) => jsonEqual(value, v))) fail("enum", "must be one of the allowed values");
  if (Array.isArray(node.allOf)) for (const part of node.allOf) walk(value, part, path, errors, depth + 1);
  for (const keyword of ["oneOf", "anyOf"]) {
    const branches = node[keyword];
    if (!Array.isArray(branches)) continue;
    let matches = 0;
    for (const branch of branches) {
      const sub: ValidationError[] = [];
      walk(value, branch, path, sub, depth + 1);
      if (sub.length === 0) matches++;
    }
    if (keyword === "oneOf" && matches !== 1) fail("oneOf", "must match exactly one branch (" + matches + " match)");
    if (keyword === "anyOf" && matches === 0) fail("anyOf", "must match at least one branch");
  }
  if (node.not !== undefined) {
    const sub: ValidationError[] = [];
    walk(value, node.not, path, sub, depth + 1);
    if (sub.length === 0) fail("not", "must not match the schema under `not`");
  }
  if (node.if !== undefined) {
    const sub: ValidationError[] = [];
    walk(value, node.if, path, sub, depth + 1);
    const branch = sub.length === 0 ? node.then : node.else;
    if (branch !== undefined) walk(value, branch, path, errors, depth + 1);
  }
  const types: string[] = Array.isArray(node.type) ? node.type : typeof node.type === "string" ? [node.type] : [];
  if (types.length > 0 && !types.some((t) => hasType(value, t))) {
    fail("type", "must be " + types.join(" or "));
    return;
  }
  if (typeof value === "string") {
    const n = "minLength" in node || "maxLength" in node ? codePoints(value) : 0;
    if (typeof node.minLength === "number" && n < node.minLength) fail("minLength", "must have at least " + node.minLength + " characters");
    if (typeof node.maxLength === "number" && n > node.maxLength) fail("maxLength", "must have at most " + node.maxLength + " characters");
    if (typeof node.pattern === "string" && !matchesPattern(node.pattern, value)) fail("pattern", "must match the pattern " + node.pattern);
    if (typeof node.format === "string" && !checkFormat(node.format, value)) fail("format", "must be a " + node.format);
  }
  if (typeof value === "number") {
    if (typeof node.minimum === "number" && value < node.minimum) fail("minimum", "must be >= " + node.minimum);
    if (typeof node.maximum === "number" && value > node.maximum) fail("maximum", "must be <= " + node.maximum);
    if (typeof node.exclusiveMinimum === "number" && value <= node.exclusiveMinimum) fail("exclusiveMinimum", "must be > " + node.exclusiveMinimum);
    if (typeof node.exclusiveMaximum === "number" && value >= node.exclusiveMaximum) fail("exclusiveMaximum", "must be < " + node.exclusiveMaximum);
    if (typeof node.multipleOf === "number" && node.multipleOf > 0) {
      const q = value / node.multipleOf;
      if (!Number.isFinite(q) || q !== Math.round(q)) fail("multipleOf", "must be a multiple of " + node.multipleOf);
    }
  }
  if (Array.isArray(value)) {
    if (typeof node.minItems === "number" && value.length < node.minItems) fail("minItems", "must have at least " + node.minItems + " items");
    if (typeof node.maxItems === "number" && value.length > node.maxItems) fail("maxItems", "must have at most " + node.maxItems + " items");
    if (node.uniqueItems === true) {
      outer: for (let i = 0; i < value.length; i++) {
        for (let j = i + 1; j < value.length; j++) {
          if (jsonEqual(value[i], value[j])) {
            fail("uniqueItems", "items " + i + " and " + j + " are equal");
            break outer;
          }
        }
      }
    }
    const tuple: any[] | undefined = Array.isArray(node.prefixItems) ? node.prefixItems : Array.isArray(node.items) ? node.items : undefined;
    const rest: any = tuple === undefined ? node.items : Array.isArray(node.prefixItems) ? node.items : node.additionalItems;
    value.forEach((item, i) => {
      const schema = tuple !== undefined && i < tuple.length ? tuple[i] : rest;
      if (schema !== undefined) walk(item, schema, path + "/" + i, errors, depth + 1);
    });
    if (node.contains !== undefined) {
      let count = 0;
      for (const item of value) {
        const sub: ValidationError[] = [];
        walk(item, node.contains, path, sub, depth + 1);
        if (sub.length === 0) count++;
      }
      const min = typeof node.minContains === "number" ? node.minContains : 1;
      if (count < min) fail("contains", "must contain at least " + min + " matching items");
      if (typeof node.maxContains === "number" && count > node.maxContains) fail("maxContains", "must contain at most " + node.maxContains + " matching items");
    }
  }
  if (typeOf(value) === "object") {
    const record = value as Record<string, unknown>;
    const keys = Object.keys(record);
    const properties = node.properties !== null && typeof node.properties === "object" ? node.properties : {};
    if (Array.isArray(node.required)) {
      for (const name of node.required) {
        if (!Object.prototype.hasOwnProperty.call(record, name)) fail("required", "the property " + JSON.stringify(name) + " is required");
      }
    }
    for (const name of Object.keys(properties)) {
      if (Object.prototype.hasOwnProperty.call(record, name)) walk(record[name], properties[name], path + "/" + escapeToken(name), errors, depth + 1);
    }
    const patterns: [string, any][] = node.patternProperties !== null && typeof node.patternProperties === "object" ? Object.entries(node.patternProperties) : [];
    for (const key of keys) {
      const at = path + "/" + escapeToken(key);
      let matched = Object.prototype.hasOwnProperty.call(properties, key);
      for (const [pattern, schema] of patterns) {
        if (matchesPattern(pattern, key)) {
          matched = true;
          walk(record[key], schema, at, errors, depth + 1);
        }
      }
      if (matched || node.additionalProperties === undefined) continue;
      if (node.additionalProperties === false) fail("additionalProperties", "the property " + JSON.stringify(key) + " is not allowed", at);
      else walk(record[key], node.additionalProperties, at, errors, depth + 1);
    }
    if (node.propertyNames !== undefined) {
      for (const key of keys) walk(key, node.propertyNames, path + "/" + escapeToken(key), errors, depth + 1);
    }
    if (typeof node.minProperties === "number" && keys.length < node.minProperties) fail("minProperties", "must have at least " + node.minProperties + " properties");
    if (typeof node.maxProperties === "number" && keys.length > node.maxProperties) fail("maxProperties", "must have at most " + node.maxProperties + " properties");
    const dependent = node.dependentRequired;
    if (dependent !== null && typeof dependent === "object") {
      for (const key of Object.keys(dependent)) {
        if (!Object.prototype.hasOwnProperty.call(record, key)) continue;
        for (const name of dependent[key]) {
          if (!Object.prototype.hasOwnProperty.call(record, name)) fail("dependentRequired", "the property " + JSON.stringify(name) + " is required when " + JSON.stringify(key) + " is present");
        }
      }
    }
  }
}

/** Validates `value` against the schema node at `pointer` (a JSON Pointer into the embedded schema). */
export function validateAt(pointer: string, value: unknown): ValidationResult {
  const node = schemaAt(pointer);
  if (node === undefined) return { ok: false, errors: [{ instancePath: "", keyword: "$ref", message: "the schema has no node at " + pointer }] };
  const errors: ValidationError[] = [];
  walk(value, node, "", errors, 0);
  return { ok: errors.length === 0, errors };
}

/** Validates a whole message against the document root. */
export function validateProtocolMessage(value: unknown): ValidationResult {
  return validateAt("", value);
}

/** Validates `value` against the definition `name`. */
export function validateDefinition(name: DefinitionName | string, value: unknown): ValidationResult {
  const definitions = SCHEMA[DEFINITIONS_KEY];
  if (definitions === null || typeof definitions !== "object" || !Object.prototype.hasOwnProperty.call(definitions, name)) {
    return { ok: false, errors: [{ instancePath: "", keyword: "$ref", message: "unknown definition " + JSON.stringify(name) }] };
  }
  return validateAt("/" + DEFINITIONS_KEY + "/" + escapeToken(name), value);
}

function assertValid(result: ValidationResult): void {
  if (!result.ok) throw new ProtocolValidationError(result.errors);
}
