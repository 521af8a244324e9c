// Bulk cross-validator for differential tests: many instances, each against its own target
// schema of one document, in one node process, reporting AJV's first error.
//
// usage: node ajv-verdicts-bulk.mjs <schema.json> <instances.ndjson>
//
// Each input line is `{"t": "<definition name, or empty for the root>", "m": <instance>}`.
// Each output line is `1` (valid) or `0 <JSON string of the first error's instancePath>`.
// The Ajv class comes from `$schema` (draft-07 Ajv, 2019-09 Ajv2019, 2020-12 Ajv2020);
// ajv-formats adds the formats; `strict: false`; `allErrors: false`, so the first error is the
// one Ajv stops at. A definition is validated as `{"$ref": "#/<$defs|definitions>/<name>"}`
// inside the same document, so every `$ref` resolves as from the root.
import fs from "node:fs";
import readline from "node:readline";
import { requireToolDefault } from "./lib/modules.mjs";

const DRAFTS = new Map([
  ["http://json-schema.org/draft-07/schema", "ajv"],
  ["https://json-schema.org/draft/2019-09/schema", "ajv/dist/2019"],
  ["https://json-schema.org/draft/2020-12/schema", "ajv/dist/2020"],
]);

function fail(message) {
  process.stderr.write(`ajv-verdicts-bulk: ${message}\n`);
  process.exit(2);
}

const [schemaPath, instancesPath] = process.argv.slice(2);
if (!schemaPath || !instancesPath) {
  fail("usage: node ajv-verdicts-bulk.mjs <schema.json> <instances.ndjson>");
}
const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
const draftUri = typeof schema.$schema === "string" ? schema.$schema.replace(/#$/, "") : "";
const ajvModule = DRAFTS.get(draftUri);
if (!ajvModule) fail(`unsupported or missing $schema ${JSON.stringify(schema.$schema)}`);
const Ajv = requireToolDefault(ajvModule);
const addFormats = requireToolDefault("ajv-formats");

const keyword = schema.$defs !== undefined ? "$defs" : "definitions";
const validators = new Map();
function validatorFor(target) {
  let validate = validators.get(target);
  if (validate) return validate;
  const ajv = new Ajv({ strict: false, allErrors: false, logger: false });
  addFormats(ajv);
  if (target === "") {
    validate = ajv.compile(schema);
  } else {
    if (!schema[keyword] || !Object.hasOwn(schema[keyword], target)) fail(`no definition ${JSON.stringify(target)}`);
    const wrapper = { $schema: schema.$schema };
    if (schema.$id !== undefined) wrapper.$id = schema.$id;
    wrapper[keyword] = schema[keyword];
    wrapper.$ref = `#/${keyword}/${target.replace(/~/g, "~0").replace(/\//g, "~1")}`;
    validate = ajv.compile(wrapper);
  }
  validators.set(target, validate);
  return validate;
}

const lines = readline.createInterface({ input: fs.createReadStream(instancesPath, "utf8"), crlfDelay: Infinity });
const out = [];
for await (const line of lines) {
  if (line === "") continue;
  const { t, m } = JSON.parse(line);
  const validate = validatorFor(t);
  if (validate(m)) {
    out.push("1");
  } else {
    const first = validate.errors && validate.errors[0];
    out.push(`0 ${JSON.stringify(first ? first.instancePath : "")}`);
  }
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
