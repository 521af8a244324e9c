// Cross-validator: validates NDJSON instances with Ajv 8 and prints one verdict per line.
//
// usage: node ajv-verdicts.mjs <schema.json> <definition|-> <instances.ndjson>
//
// The draft comes from the schema's `$schema`: draft-07 uses Ajv, 2019-09 Ajv2019, 2020-12
// Ajv2020; ajv-formats adds the standard formats; `strict: false` accepts the annotations and
// unknown keywords real schemas carry. With a definition name, instances are validated against
// `{"$ref": "#/<$defs|definitions>/<name>"}` inside the same document, so that every `$ref`
// resolves as it would from the root. Each output line is
// `{"valid": bool, "errors": [{"instancePath": "/a/0", "keyword": "...", "message": "..."}]}`,
// errors in the order Ajv reports them (allErrors: true).
import fs from "node:fs";
import readline from "node:readline";
import { requireToolDefault } from "./lib/modules.mjs";

const DRAFTS = new Map([
  ["http://json-schema.org/draft-07/schema", "ajv"],
  ["https://json-schema.org/draft/2019-09/schema", "ajv/dist/2019"],
  ["https://json-schema.org/draft/2020-12/schema", "ajv/dist/2020"],
]);

function fail(message) {
  process.stderr.write(`ajv-verdicts: ${message}\n`);
  process.exit(2);
}

const [schemaPath, definition, instancesPath] = process.argv.slice(2);
if (!schemaPath || !definition || !instancesPath) {
  fail("usage: node ajv-verdicts.mjs <schema.json> <definition|-> <instances.ndjson>");
}

const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
const draftUri = typeof schema.$schema === "string" ? schema.$schema.replace(/#$/, "") : "";
const ajvModule = DRAFTS.get(draftUri);
if (!ajvModule) {
  fail(`unsupported or missing $schema ${JSON.stringify(schema.$schema)} in ${schemaPath}`);
}

function definitionSchema(root, name) {
  const keyword = root.$defs !== undefined ? "$defs" : "definitions";
  const defs = root[keyword];
  if (!defs || typeof defs !== "object" || !Object.hasOwn(defs, name)) {
    fail(`definition ${JSON.stringify(name)} not found in ${schemaPath}`);
  }
  const wrapper = { $schema: root.$schema };
  if (root.$id !== undefined) wrapper.$id = root.$id;
  wrapper[keyword] = defs;
  wrapper.$ref = `#/${keyword}/${name.replace(/~/g, "~0").replace(/\//g, "~1")}`;
  return wrapper;
}

const Ajv = requireToolDefault(ajvModule);
const addFormats = requireToolDefault("ajv-formats");
const ajv = new Ajv({ strict: false, allErrors: true, logger: false });
addFormats(ajv);
const validate = ajv.compile(definition === "-" ? schema : definitionSchema(schema, definition));

const lines = readline.createInterface({ input: fs.createReadStream(instancesPath, "utf8"), crlfDelay: Infinity });
const out = [];
for await (const line of lines) {
  if (line.trim() === "") continue;
  const instance = JSON.parse(line);
  const valid = validate(instance);
  const errors = valid
    ? []
    : (validate.errors ?? []).map((e) => ({ instancePath: e.instancePath, keyword: e.keyword, message: e.message ?? "" }));
  out.push(JSON.stringify({ valid, errors }));
}
process.stdout.write(out.length ? out.join("\n") + "\n" : "");
