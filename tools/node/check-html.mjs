// Opens a local HTML page in headless Chromium and reports what a person would see: the page's
// text, console errors, page errors and any network request (a self-contained page makes none).
// Usage: node check-html.mjs PAGE.html [SCREENSHOT.png]
// Prints one JSON object: {"text", "consoleErrors", "pageErrors", "requests", "detailsCount",
// "expandedAfterClick"}.
import path from "node:path";
import { pathToFileURL } from "node:url";
import { launchChromium } from "./lib/browser.mjs";

const [page, screenshot] = process.argv.slice(2);
if (!page) {
  console.error("usage: node check-html.mjs PAGE.html [SCREENSHOT.png]");
  process.exit(2);
}
const url = pathToFileURL(path.resolve(page)).href;
const browser = await launchChromium();
try {
  const tab = await browser.newPage();
  const consoleErrors = [];
  const pageErrors = [];
  const requests = [];
  tab.on("console", (msg) => {
    if (msg.type() === "error") consoleErrors.push(msg.text());
  });
  tab.on("pageerror", (err) => pageErrors.push(String(err)));
  tab.on("request", (req) => {
    if (req.url() !== url) requests.push(req.url());
  });
  await tab.goto(url, { waitUntil: "load" });
  const detailsCount = await tab.locator("details.raw").count();
  await tab.click("#expand-all");
  const expandedAfterClick = await tab.locator("details.raw[open]").count();
  const text = await tab.innerText("body");
  if (screenshot) await tab.screenshot({ path: screenshot, fullPage: true });
  console.log(JSON.stringify({ text, consoleErrors, pageErrors, requests, detailsCount, expandedAfterClick }));
} finally {
  await browser.close();
}
