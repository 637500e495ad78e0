// What the browser tests share: the real `opsight` command (the installed package's, or
// $OPSIGHT_CLI), runs recorded into a throwaway store, the real `opsight ui` server on a
// free port, and Debian's Chromium driven by playwright-core (nothing is downloaded:
// PLAYWRIGHT_SKIP_BROWSER_DOWNLOAD=1 at install, the system's browser at run time).
import assert from "node:assert/strict";
import { execFileSync, spawn } from "node:child_process";
import { existsSync, mkdirSync, mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { after, before } from "node:test";
import { fileURLToPath } from "node:url";
import { chromium } from "playwright-core";

const here = dirname(fileURLToPath(import.meta.url));
export const repository = resolve(here, "../..");
export const opsight = process.env.OPSIGHT_CLI ?? join(repository, ".venv/bin/opsight");
export const chromiumPath = process.env.OPSIGHT_CHROMIUM ?? "/usr/bin/chromium";
export const artifacts = process.env.OPSIGHT_UI_ARTIFACTS ?? join(repository, "web/test-artifacts");

export function requireComponents() {
  if (!existsSync(opsight)) throw new Error(`${opsight} is missing: run make install (or set OPSIGHT_CLI)`);
  if (!existsSync(chromiumPath))
    throw new Error(`${chromiumPath} is missing: scripts/setup.sh test installs Debian's chromium (or set OPSIGHT_CHROMIUM)`);
  mkdirSync(artifacts, { recursive: true });
}

export function temporaryFolder(prefix) {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeFolder(path) {
  rmSync(path, { recursive: true, force: true });
}

// A test's world: a throwaway folder (named by `prefix`) and the environment of its opsight
// commands, the caller's with a store of its own under the folder and no other OPSIGHT_
// setting of the shell leaking in (OPSIGHT_WEB_ROOT aside: it names the UI to serve).
export function isolatedWorld(prefix) {
  requireComponents();
  const folder = temporaryFolder(prefix);
  const env = { ...process.env, OPSIGHT_HOME: join(folder, "home") };
  for (const key of Object.keys(env))
    if (key.startsWith("OPSIGHT_") && key !== "OPSIGHT_HOME" && key !== "OPSIGHT_WEB_ROOT") delete env[key];
  return { folder, env };
}

// `opsight ui` on env's store, Chromium, and a page on the UI whose dialogs and uncaught
// errors go to `problems`; close() closes the browser, stops the server, removes `folder`
// and resolves to the server's exit status.
export async function openUi(env, problems, folder) {
  const ui = await startUi([], env);
  const browser = await launchBrowser();
  const page = await openPage(browser.context, ui.url, problems);
  return {
    ui,
    page,
    close: async () => {
      await browser.close();
      const status = await ui.stop();
      removeFolder(folder);
      return status;
    },
  };
}

// The set-up every browser test file shares, as node:test hooks of the calling describe():
// before its tests, an isolated world (`prefix` names its folder), `record(world)` to
// record the file's own runs into its store (what it resolves to is kept as
// session.recorded), then `opsight ui` on that store and a page opened on it; after them,
// the browser closed, the server stopped (it must exit 0 on SIGINT), the folder removed,
// and no dialog or uncaught page error (session.problems) may have happened. The returned
// object is filled in by the time the tests run: { folder, env, ui, page, problems,
// recorded }.
export function uiSession(prefix, record = async () => undefined) {
  const session = { folder: undefined, env: undefined, ui: undefined, page: undefined, problems: [], recorded: undefined };
  let opened;
  before(async () => {
    const world = isolatedWorld(prefix);
    session.folder = world.folder;
    session.env = world.env;
    try {
      session.recorded = await record(world);
    } catch (failure) {
      removeFolder(world.folder);
      throw failure;
    }
    opened = await openUi(world.env, session.problems, world.folder);
    session.ui = opened.ui;
    session.page = opened.page;
  });
  after(async () => {
    if (!opened) return;
    const status = await opened.close();
    assert.equal(status, 0, "opsight ui stops on SIGINT with status 0");
    assert.deepEqual(session.problems, [], "no dialog and no page error");
  });
  return session;
}

// Runs `opsight ARGS` with the test's store; returns stdout.
export function runOpsight(args, env, options = {}) {
  return execFileSync(opsight, args, { env, encoding: "utf8", maxBuffer: 1 << 28, ...options });
}

export function reportJson(args, env) {
  return JSON.parse(runOpsight([...args, "--format", "json"], env));
}

// Starts `opsight ui --port 0 ARGS` and resolves once it prints its URL.
export function startUi(args, env) {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(opsight, ["ui", "--port", "0", ...args], { env, stdio: ["ignore", "pipe", "pipe"] });
    let output = "";
    const timer = setTimeout(() => reject(new Error(`opsight ui did not print its URL in 20 s: ${output}`)), 20000);
    const onData = (chunk) => {
      output += chunk.toString();
      const match = output.match(/serving (http:\/\/\S+)/);
      if (match) {
        clearTimeout(timer);
        resolvePromise({
          url: match[1],
          output: () => output,
          stop: () =>
            new Promise((done) => {
              if (child.exitCode !== null) return done(child.exitCode);
              child.once("exit", (code) => done(code));
              child.kill("SIGINT");
            }),
        });
      }
    };
    child.stdout.on("data", onData);
    child.stderr.on("data", onData);
    child.once("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`opsight ui exited (${code}) before serving: ${output}`));
    });
  });
}

export async function launchBrowser() {
  const profile = temporaryFolder("opsight-chromium-");
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: chromiumPath,
    headless: true,
    viewport: { width: 1400, height: 900 },
    args: [
      "--no-sandbox",
      "--disable-gpu",
      "--disable-background-networking",
      "--no-first-run",
      "--disable-component-update",
      "--disable-sync",
    ],
  });
  return {
    context,
    close: async () => {
      await context.close();
      removeFolder(profile);
    },
  };
}

// Opens `url` in a new page that fails the test on a dialog (an injected script's alert)
// or an uncaught error; waits until the app says the page is ready.
export async function openPage(context, url, problems) {
  const page = await context.newPage();
  page.on("dialog", async (dialog) => {
    problems.push(`dialog: ${dialog.message()}`);
    await dialog.dismiss();
  });
  page.on("pageerror", (error) => problems.push(`page error: ${error.message}`));
  await page.goto(url);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
  return page;
}

export async function navigate(page, hash) {
  await page.evaluate((target) => {
    delete document.body.dataset.ready;
    if (location.hash === target) window.dispatchEvent(new HashChangeEvent("hashchange"));
    else location.hash = target;
  }, hash);
  await page.waitForSelector("body[data-ready=true]", { timeout: 30000 });
}

export async function screenshot(page, name) {
  await page.screenshot({ path: join(artifacts, `${name}.png`), fullPage: false });
}

// Fails unless the page, at `width` × `height` (1,280 × 800 unless told), scrolls no wider
// than its window (naming the elements that stick out); screenshots it as fit-NAME.png
// first. The page keeps that size afterwards unless `restore` is given ({ width, height }).
export async function assertFitsWindow(page, name, { width = 1280, height = 800, restore } = {}) {
  await page.setViewportSize({ width, height });
  await screenshot(page, `fit-${name}`);
  const { scrollWidth, clientWidth, widest } = await page.evaluate(() => {
    const root = document.documentElement;
    const widest = [...document.querySelectorAll("main *")]
      .map((element) => ({ element, right: element.getBoundingClientRect().right }))
      .filter(({ right }) => right > root.clientWidth)
      .sort((a, b) => b.right - a.right)
      .slice(0, 3)
      .map(({ element, right }) => `${element.tagName.toLowerCase()}${element.id ? `#${element.id}` : ""}.${element.className} ends at ${Math.round(right)}`);
    return { scrollWidth: root.scrollWidth, clientWidth: root.clientWidth, widest };
  });
  if (restore) await page.setViewportSize(restore);
  assert.ok(scrollWidth <= clientWidth, `${name} scrolls sideways at ${width} px: ${scrollWidth} > ${clientWidth}; ${widest.join("; ")}`);
}
