// Loads packages from the test-tool install folder (.tools/node/node_modules), which lies outside
// the resolution path of the scripts in tools/node. AGENTWIRE_TOOLS_NODE overrides the folder.
import { createRequire } from "node:module";
import path from "node:path";
import { fileURLToPath } from "node:url";

const here = path.dirname(fileURLToPath(import.meta.url));

/** The folder that holds the installed node_modules of the test tools. */
export const toolsNodeDir = process.env.AGENTWIRE_TOOLS_NODE
  ? path.resolve(process.env.AGENTWIRE_TOOLS_NODE)
  : path.resolve(here, "..", "..", "..", ".tools", "node");

const requireFromTools = createRequire(path.join(toolsNodeDir, "package.json"));

/**
 * `require` of an installed test-tool package, with the default export unwrapped so that
 * CommonJS and transpiled ES modules read alike.
 */
export function requireTool(name) {
  let loaded;
  try {
    loaded = requireFromTools(name);
  } catch (error) {
    throw new Error(
      `missing test tool ${name} in ${toolsNodeDir}: run scripts/install-test-tools.sh (${error.message})`,
    );
  }
  return loaded;
}

/** Like `requireTool`, but returns `module.default` when the package has one. */
export function requireToolDefault(name) {
  const loaded = requireTool(name);
  return loaded && loaded.default ? loaded.default : loaded;
}
