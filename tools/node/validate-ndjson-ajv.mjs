// What `agentwire validate --schema S [--def X] --ndjson FILE` does, written with AJV 8 the way
// a user would: read the file, JSON.parse each non-blank line, validate it, print a report of
// every invalid line and a summary. The CLI benchmark runs both on the same files.
//
// usage: node validate-ndjson-ajv.mjs <schema.json> <definition|-> <file.ndjson>
//
// Output: for each invalid line, `line N: invalid` and one indented line per error AJV reports
// (`allErrors: false`, so the first one), then `M messages: V valid, I invalid`. Exit 1 when a
// line is invalid, as the CLI does.
import fs from "node:fs";
import { requireToolDefault } from "./lib/modules.mjs";

const DRAFTS = new Map([
  ["http://json-schema.org/draft-07/schema", "ajv"],
  ["https://json-schema.org/draft/2019-09/schema", "ajv/dist/2019"],
  ["https://json-schema.org/draft/2020-12/schema", "ajv/dist/2020"],
]);

const [schemaPath, definition, inputPath] = process.argv.slice(2);
if (!inputPath) {
  process.stderr.write("usage: node validate-ndjson-ajv.mjs <schema.json> <definition|-> <file.ndjson>\n");
  process.exit(2);
}

const schema = JSON.parse(fs.readFileSync(schemaPath, "utf8"));
const module = DRAFTS.get(typeof schema.$schema === "string" ? schema.$schema.replace(/#$/, "") : "");
if (!module) {
  process.stderr.write(`unsupported $schema ${JSON.stringify(schema.$schema)}\n`);
  process.exit(2);
}
const Ajv = requireToolDefault(module);
const addFormats = requireToolDefault("ajv-formats");
const ajv = new Ajv({ strict: false, allErrors: false, logger: false });
addFormats(ajv);
const id = "agentwire:validate";
ajv.addSchema({ ...schema, $id: id });
const keyword = schema.$defs !== undefined ? "$defs" : "definitions";
const ref =
  definition === "-" ? id : `${id}#/${keyword}/${definition.replace(/~/g, "~0").replace(/\//g, "~1")}`;
const validate = ajv.getSchema(ref);
if (!validate) {
  process.stderr.write(`cannot compile ${ref}\n`);
  process.exit(2);
}

const lines = fs.readFileSync(inputPath, "utf8").split("\n");
const out = [];
let messages = 0;
let invalid = 0;
for (let i = 0; i < lines.length; i++) {
  let line = lines[i];
  if (line.endsWith("\r")) line = line.slice(0, -1);
  if (line.trim() === "") continue;
  messages++;
  let value;
  try {
    value = JSON.parse(line);
  } catch (e) {
    invalid++;
    out.push(`line ${i + 1}: invalid\n  ${e.message} [json.syntax]`);
    continue;
  }
  if (!validate(value)) {
    invalid++;
    out.push(`line ${i + 1}: invalid`);
    for (const err of validate.errors) {
      out.push(`  ${err.instancePath || "(root)"}: ${err.message} [${err.keyword} at ${err.schemaPath}]`);
    }
  }
}
out.push(`${messages} messages: ${messages - invalid} valid, ${invalid} invalid`);
process.stdout.write(out.join("\n") + "\n");
process.exitCode = invalid > 0 ? 1 : 0;
