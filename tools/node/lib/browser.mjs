// Launches the machine's Chromium (Debian package `chromium`) headless through playwright-core,
// which never downloads a browser of its own. AGENTWIRE_CHROMIUM overrides the executable.
import fs from "node:fs";
import { requireTool } from "./modules.mjs";

/**
 * Flags for headless Chromium as root on a machine without outside network: no sandbox, no GPU,
 * none of the background connections a closed network refuses. Kept equal to
 * CHROMIUM_HEADLESS_FLAGS in crates/agentwire-testkit/src/tools.rs (Playwright adds --headless).
 */
export const CHROMIUM_FLAGS = [
  "--no-sandbox",
  "--disable-gpu",
  "--disable-dev-shm-usage",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
  "--disable-default-apps",
  "--disable-extensions",
];

/** Path of the Chromium executable; throws naming the installer when it is missing. */
export function chromiumPath() {
  const path = process.env.AGENTWIRE_CHROMIUM || "/usr/bin/chromium";
  if (!fs.existsSync(path)) {
    throw new Error(
      `missing test tool chromium at ${path}: run scripts/install-test-tools.sh (it installs the Debian package chromium)`,
    );
  }
  return path;
}

/** A Playwright `Browser` on headless Chromium; close it when done. */
export async function launchChromium(options = {}) {
  const { chromium } = requireTool("playwright-core");
  return chromium.launch({
    executablePath: chromiumPath(),
    headless: true,
    args: CHROMIUM_FLAGS,
    ...options,
  });
}
