#!/usr/bin/env node
// End-to-end test in a real VS Code (code-server 4.100.3 = VS Code 1.100.3), headless Chromium.
//
//   npm run e2e                  (runs e2e/setup.sh first; installs into ~/.cache/memlens-e2e)
//   MEMLENS_E2E_PYTHON=/path/to/python npm run e2e   (default: <repo>/.venv/bin/python)
//
// It packages the extension (.vsix), installs it into a fresh code-server profile, profiles an
// example program with `<python> -m memlens run`, opens it and checks what the user sees: the
// inlay hint text on the heaviest line, the hover's figures, the status bar, the lenses; then it runs
// "memlens: Run Current File", sets a baseline, compares, opens the timeline and scrubs it (the
// hint then shows a moment's bytes), jumps to the peak, toggles the hints, and finally checks
// Restricted Mode (runs shown, nothing runs), the message for an interpreter without memlens,
// and a notebook whose %%memlens cell shows its hint (e2e/notebook.js).
// Screenshots (annotated editor, comparison mode, timeline view) go to the run folder under the
// cache; MEMLENS_E2E_SCREENSHOTS=DIR writes them to DIR instead (e.g. docs/images to update
// the docs). The tree is never written otherwise: `git status` stays clean.
// Not part of `npm test` (it needs a browser and ~1 GB of tools).
'use strict';

const { execFileSync, spawn } = require('child_process');
const fs = require('fs');
const net = require('net');
const os = require('os');
const path = require('path');
const { notebookSession } = require('./notebook');

const EXT_DIR = path.resolve(__dirname, '..');
const REPO = path.resolve(EXT_DIR, '..');
const CACHE = process.env.MEMLENS_E2E_CACHE || path.join(os.homedir(), '.cache', 'memlens-e2e');
const PYTHON = process.env.MEMLENS_E2E_PYTHON || path.join(REPO, '.venv', 'bin', 'python');
const SCREENSHOTS = process.env.MEMLENS_E2E_SCREENSHOTS ? path.resolve(process.env.MEMLENS_E2E_SCREENSHOTS) : undefined;
const EXAMPLE = path.join(REPO, 'examples', 'leaky_cache.py');
const CODE_SERVER = path.join(CACHE, 'node', 'node_modules', 'code-server', 'out', 'node', 'entry.js');
const CHROMIUM = process.env.MEMLENS_E2E_CHROMIUM || '/usr/bin/chromium';
const TIMEOUT_MS = 90_000;

const log = (msg) => process.stderr.write(`[e2e] ${msg}\n`);
const norm = (s) => (s || '').replace(/\u00a0/g, ' ').replace(/[ \t]+/g, ' ');

function fail(msg) {
  log(`FAIL: ${msg}`);
  process.exitCode = 1;
  throw new Error(msg);
}

function freePort() {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.on('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address();
      srv.close(() => resolve(port));
    });
  });
}

async function waitHttp(url, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      const res = await fetch(url);
      if (res.status < 500) {
        return;
      }
    } catch {
      // not up yet
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  fail(`code-server did not answer at ${url} within ${ms / 1000} s`);
}

/** What the server will show for the heaviest line, computed with memlens itself. */
function expectedFigures(workspace, file) {
  const script = `
import json, sys
from memlens.annotate import HINT_WIDTH, line_label
from memlens.runfile import reader
from memlens.store import Store
from memlens.units import fmt_bytes
from memlens_lsp.settings import Settings
from memlens_lsp.views import is_call_site
path = Store(sys.argv[1]).latest("program")
run = reader.read(path)
sf = next(f for f in run.files.values() if f.path.endswith(sys.argv[2]))
line, st = max(sf.lines.items(), key=lambda kv: (kv[1].peak_bytes, -kv[0]))
assert not is_call_site(st, Settings())
assert len(run.moments) > 10, "the run has moments"
print(json.dumps({"line": line, "label": line_label(st, "peak", width=HINT_WIDTH), "peak": fmt_bytes(st.peak_bytes),
                  "alloc": fmt_bytes(st.alloc_bytes), "source": sf.text.splitlines()[line - 1].strip(),
                  "run_id": path.stem}))
`;
  return JSON.parse(execFileSync(PYTHON, ['-c', script, workspace, path.basename(file)], { encoding: 'utf8' }));
}

/** Comparison mode as the server computes it: the hint of `line` and the lines it colours. */
function expectedComparison(workspace, file, line) {
  const script = `
import json, sys
from pathlib import Path
from memlens_lsp.features.runs import load_folder
from memlens_lsp.index import FolderState, canonical
from memlens_lsp.settings import Settings
from memlens_lsp.staleness import IDENTITY
from memlens_lsp import views
root = Path(sys.argv[1]).resolve()
state, errors = load_folder(FolderState(root, root.as_uri()))
assert not errors, errors
view = state.view(canonical(sys.argv[2]))
settings = Settings(compare_with_baseline=True)
n = len(view.text_lines)
hints = {h.line: h.label for h in views.hint_items(view, IDENTITY, settings, 0, n, has_baseline=True)}
changes = views.line_changes(view, IDENTITY, settings, n)
print(json.dumps({"label": hints[int(sys.argv[3]) - 1], "changes": [[c.line, c.kind, c.level] for c in changes],
                  "hints": list(hints.values())}))
`;
  return JSON.parse(execFileSync(PYTHON, ['-c', script, workspace, file, String(line)], { encoding: 'utf8' }));
}

function profile(workspace, file) {
  execFileSync(PYTHON, ['-m', 'memlens', 'run', '--no-report', file], { cwd: workspace, stdio: ['ignore', 'ignore', 'pipe'] });
}

// What `git status` says of the repository: the run must leave it as it found it (screenshots
// and the workspace live under CACHE; dist/ and the .vsix are ignored). Null outside a checkout.
function gitStatus() {
  try {
    // Screenshots asked for in the tree (MEMLENS_E2E_SCREENSHOTS) are the one thing written there.
    const inside = SCREENSHOTS && !path.relative(REPO, SCREENSHOTS).startsWith('..');
    const shots = inside ? [`:(exclude)${path.relative(REPO, SCREENSHOTS) || '.'}`] : [];
    return execFileSync('git', ['status', '--porcelain', '--untracked-files=all', '--', '.', ...shots], { cwd: REPO, encoding: 'utf8' });
  } catch {
    return null;
  }
}

async function main() {
  const statusBefore = gitStatus();
  if (!process.env.MEMLENS_E2E_NO_SETUP) {
    execFileSync('bash', [path.join(__dirname, 'setup.sh')], { stdio: 'inherit' });
  }
  try {
    execFileSync(PYTHON, ['-c', 'import memlens, memlens_lsp, pytest, IPython'], { stdio: 'ignore' });
  } catch {
    fail(`${PYTHON} cannot import memlens, memlens_lsp, pytest and IPython; set MEMLENS_E2E_PYTHON (e.g. run ./dev test first for <repo>/.venv)`);
  }

  log('packaging the extension');
  execFileSync('npm', ['run', '--silent', 'package'], { cwd: EXT_DIR, stdio: ['ignore', 'ignore', 'inherit'] });
  const vsix = path.join(EXT_DIR, 'memlens.vsix');

  // A fresh profile and workspace under the cache each time.
  const runDir = path.join(CACHE, 'run');
  fs.rmSync(runDir, { recursive: true, force: true });
  const workspace = path.join(runDir, 'workspace');
  const extensions = path.join(runDir, 'extensions');
  const userData = path.join(runDir, 'user-data');
  fs.mkdirSync(workspace, { recursive: true });
  fs.mkdirSync(path.join(userData, 'User'), { recursive: true });
  const file = path.join(workspace, 'leaky_cache.py');
  fs.copyFileSync(EXAMPLE, file);
  log(`profiling ${file}`);
  profile(workspace, file);
  const want = expectedFigures(workspace, file);
  log(`expect line ${want.line} (${want.source}) -> "${want.label}"`);

  const csArgs = ['--extensions-dir', extensions, '--user-data-dir', userData];
  log('installing the .vsix into code-server');
  execFileSync(process.execPath, [CODE_SERVER, ...csArgs, '--install-extension', vsix], { stdio: ['ignore', 'ignore', 'inherit'] });
  const { chromium } = require(path.join(CACHE, 'node', 'node_modules', 'playwright-core'));
  const browser = await chromium.launch({
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
      '--disable-component-update', '--disable-sync'],
  });
  try {
    await trustedSession({ browser, runDir, workspace, userData, csArgs, file, want });
    if (!process.env.MEMLENS_E2E_SKIP_UNTRUSTED) {
      await untrustedSession({ browser, runDir, workspace, userData, csArgs, want });
    }
    if (!process.env.MEMLENS_E2E_SKIP_MISSING) {
      await missingMemlensSession({ browser, runDir, workspace, userData, csArgs });
    }
    if (!process.env.MEMLENS_E2E_SKIP_NOTEBOOK) {
      const helpers = { PYTHON, log, openSession, openFile, waitForHint, waitFor, screenshot, failWithScreenshot };
      await notebookSession({ browser, runDir, workspace, userData, csArgs }, helpers);
    }
    const statusAfter = gitStatus();
    if (statusAfter !== statusBefore) {
      fail(`the run changed the repository (git status before:\n${statusBefore}\nafter:\n${statusAfter})`);
    }
    log('PASS');
  } finally {
    await browser.close().catch(() => undefined);
  }
}

function writeUserSettings(userData, trusted, python = PYTHON) {
  fs.writeFileSync(
    path.join(userData, 'User', 'settings.json'),
    JSON.stringify(
      {
        // A user-level value: VS Code honours it in untrusted workspaces too (restricted setting).
        'memlens.interpreter': python,
        // MEMLENS_E2E_TRACE=messages|verbose logs the LSP traffic in the memlens output (debugging).
        'memlens.trace.server': process.env.MEMLENS_E2E_TRACE || 'off',
        'workbench.startupEditor': 'none',
        'workbench.colorTheme': 'Default Dark Modern',
        'workbench.tips.enabled': false,
        'workbench.enableExperiments': false,
        'extensions.ignoreRecommendations': true,
        'telemetry.telemetryLevel': 'off',
        'editor.fontSize': 14,
        'editor.minimap.enabled': false,
        'editor.inlayHints.enabled': 'on',
        'editor.hover.delay': 300,
        'chat.disableAIFeatures': true,
        'security.workspace.trust.enabled': !trusted,
        'security.workspace.trust.startupPrompt': 'never',
        'security.workspace.trust.banner': 'never',
      },
      null,
      2,
    ),
  );
}

/** Starts code-server on the workspace, opens it in a new page and opens leaky_cache.py. */
async function openSession({ browser, runDir, workspace, userData, csArgs }, trusted, python = PYTHON) {
  writeUserSettings(userData, trusted, python);
  const port = await freePort();
  const server = spawn(
    process.execPath,
    [CODE_SERVER, '--auth', 'none', '--bind-addr', `127.0.0.1:${port}`, '--disable-telemetry', '--disable-update-check',
      ...(trusted ? ['--disable-workspace-trust'] : []), ...csArgs, workspace],
    { stdio: ['ignore', 'pipe', 'pipe'], detached: true },
  );
  const serverLog = fs.createWriteStream(path.join(runDir, `code-server-${trusted ? 'trusted' : 'untrusted'}.log`));
  server.stdout.pipe(serverLog);
  server.stderr.pipe(serverLog);
  const close = async (page) => {
    if (page) {
      await page.close().catch(() => undefined);
    }
    try {
      process.kill(-server.pid, 'SIGTERM');
    } catch {
      // already gone
    }
    serverLog.end();
  };
  let page;
  try {
    await waitHttp(`http://127.0.0.1:${port}/healthz`, 60_000);
    page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
    page.setDefaultTimeout(TIMEOUT_MS);
    await page.goto(`http://127.0.0.1:${port}/?folder=${encodeURIComponent(workspace)}`);
    await page.waitForSelector('.monaco-workbench');
    await page.waitForTimeout(3000);
    log(`opening leaky_cache.py (${trusted ? 'trusted' : 'untrusted'} workspace)`);
    await openFile(page, 'leaky_cache.py', '.monaco-editor .view-lines');
    // More room for the hints in the screenshot: close the side bar.
    await page.keyboard.press('Control+B');
  } catch (err) {
    if (page) {
      await page.screenshot({ path: path.join(runDir, 'failure-open.png') }).catch(() => undefined);
    }
    await close(page);
    throw err;
  }
  return { page, close };
}

/** Saves a screenshot as NAME.png in the run folder, or in MEMLENS_E2E_SCREENSHOTS. */
async function screenshot(page, runDir, name) {
  const dir = SCREENSHOTS || runDir;
  fs.mkdirSync(dir, { recursive: true });
  const file = path.join(dir, `${name}.png`);
  await page.screenshot({ path: file });
  log(`screenshot: ${file}`);
}

/** Hovers the line holding `source` until memlens's hover shows (retrying the move: a first
 * move can land while the editor is still laying out, and VS Code then shows nothing). */
async function hoverLine(page, source) {
  const row = page.locator('.monaco-editor .view-lines .view-line', { hasText: source.slice(0, 20) }).first();
  const hover = page.locator('.monaco-hover:not(.hidden)').filter({ hasText: 'memlens' }).first();
  for (let attempt = 0; attempt < 10; attempt++) {
    await page.mouse.move(5, 5);
    await page.waitForTimeout(300);
    const box = await row.boundingBox();
    if (box) {
      await page.mouse.move(box.x + 40 + attempt * 7, box.y + box.height / 2);
      await page.waitForTimeout(200);
      await page.mouse.move(box.x + 44 + attempt * 7, box.y + box.height / 2);
      try {
        await hover.waitFor({ state: 'visible', timeout: 4000 });
        const text = norm(await hover.innerText());
        // A code lens that appears above the line while the mouse moves pushes it down: the
        // hover shown is then the line above's. Only a hover of the line where it still is counts.
        const now = await row.boundingBox();
        if (now && Math.abs(now.y - box.y) < 2) {
          return text;
        }
      } catch {
        // try again
      }
    }
  }
  return fail(`no memlens hover on ${JSON.stringify(source)} after 10 tries`);
}

async function failWithScreenshot(page, runDir, name, err) {
  const shot = path.join(runDir, `failure-${name}.png`);
  await page.screenshot({ path: shot }).catch(() => undefined);
  log(`failure screenshot: ${shot}`);
  throw err;
}

async function waitFor(check, what, ms = 30_000) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await check()) {
      return;
    }
    await new Promise((r) => setTimeout(r, 500));
  }
  fail(`timed out waiting for ${what}`);
}

async function lineText(page, source) {
  const texts = await page.$$eval('.monaco-editor .view-lines .view-line', (els) => els.map((e) => e.textContent || ''));
  return norm(texts.find((t) => norm(t).includes(source)) || '');
}

/** Waits until the editor line holding `source` also shows `label` (an inlay hint). */
async function waitForHint(page, source, label) {
  const end = Date.now() + TIMEOUT_MS;
  let line;
  let scrolled = false;
  while (Date.now() < end) {
    const texts = await page.$$eval('.monaco-editor .view-lines .view-line', (els) => els.map((e) => e.textContent || ''));
    line = texts.map((t) => t.replace(/\u00a0/g, ' ')).find((t) => t.includes(source));
    if (line && norm(line).includes(norm(label))) {
      return norm(line).trim();
    }
    if (!line && !scrolled) {
      // The line is out of view: back to the top of the file (where it is).
      await page.locator('.monaco-editor .view-lines').first().click();
      await page.keyboard.press('Control+Home');
      scrolled = true;
    }
    await page.waitForTimeout(1000);
  }
  return fail(`no inlay hint "${label}"; the line reads ${JSON.stringify(line)}`);
}

const statusText = async (page) => norm(await page.locator('.statusbar').innerText());

/** Opens the quick input with `key`, retrying while the workbench is still starting up. */
async function quickInput(page, key) {
  const widget = page.locator('.quick-input-widget input').first();
  for (let i = 0; i < 20; i++) {
    await page.keyboard.press(key);
    try {
      await widget.waitFor({ state: 'visible', timeout: 3000 });
      return;
    } catch {
      await page.keyboard.press('Escape');
    }
  }
  fail(`the quick input did not open with ${key}`);
}

/** Runs a command from the palette; returns false (palette closed) when it is not offered,
 * e.g. a command disabled in Restricted Mode. */
async function runFromPalette(page, title, { optional = false } = {}) {
  await page.locator('.monaco-editor .view-lines').first().click();
  await quickInput(page, 'Control+Shift+P');
  // Into the input itself, never as keystrokes that could land in the editor if focus moves.
  const input = page.locator('.quick-input-widget input').first();
  await input.fill(`>${title}`);
  const row = page.locator('.quick-input-list .monaco-list-row', { hasText: title }).first();
  try {
    await row.waitFor({ state: 'visible', timeout: optional ? 5_000 : 15_000 });
  } catch (err) {
    if (!optional) {
      throw err;
    }
    await input.press('Escape');
    return false;
  }
  await input.press('Enter');
  return true;
}

/** Code lens texts after scrolling to the end of the file (where the main block is). */
async function lensesAtEnd(page, until) {
  await page.locator('.monaco-editor .view-lines').first().click();
  await page.keyboard.press('Control+End');
  let lenses = [];
  for (let i = 0; i < 30; i++) {
    await page.waitForTimeout(1000);
    lenses = await page.$$eval('.contentWidgets .codelens-decoration', (els) => els.map((e) => (e.textContent || '').replace(/\u00a0/g, ' ')));
    if (until(lenses)) {
      break;
    }
  }
  await page.keyboard.press('Control+Home');
  return lenses;
}

/** An interpreter without memlens: the user is told how to install it. */
async function missingMemlensSession(ctx) {
  const bare = path.join(ctx.runDir, 'bare-venv');
  execFileSync('python3', ['-m', 'venv', '--without-pip', bare]);
  const python = path.join(bare, 'bin', 'python');
  const { page, close } = await openSession(ctx, true, python);
  try {
    // The packaged extension ships no wheel here and runs from no checkout: no command to offer
    // but how to get memlens (it is not on the package index).
    const want =
      `memlens is not installed for ${python}, and it is not on the package index yet: build a wheel in a memlens ` +
      `checkout (./dev wheel) and install it with: ${python} -m pip install dist/memlens-*.whl ` +
      '(or install the checkout itself: pip install /path/to/memlens)';
    const toast = page.locator('.notifications-toasts .notification-list-item-message', { hasText: 'memlens is not installed' }).first();
    await toast.waitFor({ state: 'visible', timeout: 60_000 });
    const text = norm(await toast.innerText()).trim();
    if (text !== want) {
      fail(`install message ${JSON.stringify(text)} != ${JSON.stringify(want)}`);
    }
    log(`missing memlens ok: ${JSON.stringify(text)}`);
  } catch (err) {
    await failWithScreenshot(page, ctx.runDir, 'missing', err);
  } finally {
    await close(page);
  }
}

/** Waits for the timeline webview and returns what its SVG and list say. */
async function waitForTimelineFrame(page) {
  const end = Date.now() + 60_000;
  while (Date.now() < end) {
    for (const frame of page.frames()) {
      try {
        const text = await frame.evaluate(() => {
          const svg = document.querySelector('svg[aria-label="memory over time"]');
          const items = document.querySelectorAll('#top li');
          return svg && items.length ? { peak: (svg.textContent || '').match(/peak [^<]*? s/)?.[0], lines: items.length } : null;
        });
        if (text && text.peak) {
          return text;
        }
      } catch {
        // a frame that went away
      }
    }
    await page.waitForTimeout(500);
  }
  return fail('the timeline view did not show');
}

/** Clicks the timeline's chart at `fraction` of the run (0: start, 1: end), as a user picks a
 * moment: the point is found from where the SVG says time runs (data-x0, data-x1). */
async function clickTimeline(page, fraction) {
  const end = Date.now() + 30_000;
  while (Date.now() < end) {
    for (const frame of page.frames()) {
      const svg = frame.locator('svg[aria-label="memory over time"][data-x0]').first();
      try {
        if ((await svg.count()) === 0) {
          continue;
        }
        const geometry = await svg.evaluate((el) => ({
          x0: Number(el.dataset.x0), x1: Number(el.dataset.x1), width: el.viewBox.baseVal.width, height: el.viewBox.baseVal.height,
        }));
        const box = await svg.boundingBox();
        if (!box) {
          continue;
        }
        const x = ((geometry.x0 + fraction * (geometry.x1 - geometry.x0)) / geometry.width) * box.width;
        await svg.click({ position: { x, y: box.height / 2 } });
        return frame;
      } catch {
        // a frame that went away
      }
    }
    await page.waitForTimeout(500);
  }
  return fail('no timeline chart to click');
}

/** The timeline page's "Shown: ..." text. */
async function shownOnTimeline(frame) {
  return norm(await frame.locator('#shown').innerText());
}

const TEST_FILE = `from leaky_cache import _cache, handle_request


def test_serves_a_profile():
    assert handle_request(7) > 0
    _cache.clear()
`;

/** Opens a file of the workspace with Ctrl+P (again, while the workbench is slow to take it),
 * until `selector` shows (default: a text editor's lines). */
async function openFile(page, name, selector = '.monaco-editor .view-lines') {
  const tab = page.locator('.tabs-container .tab.active', { hasText: name }).first();
  for (let attempt = 0; attempt < 5; attempt++) {
    const editor = page.locator('.monaco-editor .view-lines').first();
    if (await editor.isVisible().catch(() => false)) {
      await editor.click();
    }
    await quickInput(page, 'Control+P');
    const input = page.locator('.quick-input-widget input').first();
    await input.fill(name);
    const row = page.locator('.quick-input-list .monaco-list-row', { hasText: name }).first();
    try {
      await row.waitFor({ state: 'visible', timeout: 15_000 });
      await page.waitForTimeout(500);
      await input.press('Enter');
      await tab.waitFor({ state: 'visible', timeout: 20_000 });
      await page.waitForSelector(selector);
      await page.waitForTimeout(1000);
      return;
    } catch {
      await page.keyboard.press('Escape');
    }
  }
  fail(`could not open ${name}`);
}

const runFiles = (workspace) =>
  fs.readdirSync(path.join(workspace, '.memlens', 'runs')).filter((f) => f.endsWith('.mlrun'));

async function trustedSession(ctx) {
  const { runDir, workspace, want } = ctx;
  const { page, close } = await openSession(ctx, true);
  try {
    // 1. The inlay hint on the heaviest line.
    log(`inlay hint ok: ${JSON.stringify(await waitForHint(page, want.source, want.label))}`);

    // 2. The status bar shows the loaded run.
    const status = await statusText(page);
    if (!/\d+(\.\d)? (B|KiB|MiB|GiB) peak · \d+[smhd] ago/.test(status)) {
      fail(`status bar has no run: ${JSON.stringify(status)}`);
    }
    log(`status bar ok: ${JSON.stringify(status.match(/[^\n]*peak · [^\n]*ago/)[0].trim())}`);

    // 3. The hover on that line has the figures.
    const hoverText = await hoverLine(page, want.source);
    for (const part of [want.label, 'peak', want.peak, 'allocated', want.alloc]) {
      if (!hoverText.includes(norm(part))) {
        fail(`hover lacks ${JSON.stringify(part)}: ${JSON.stringify(hoverText)}`);
      }
    }
    log(`hover ok: ${JSON.stringify(hoverText.split('\n').slice(0, 3).join(' | '))}`);
    await page.waitForTimeout(500);
    await screenshot(page, runDir, 'vscode-annotated');
    await page.mouse.move(5, 5);
    await page.keyboard.press('Escape');

    // The server's "Run under memlens" lens is offered above the main block (not when untrusted).
    const lenses = await lensesAtEnd(page, (l) => l.some((t) => /Run under memlens/.test(t)));
    if (!lenses.some((t) => /Run under memlens/.test(t))) {
      fail(`no "Run under memlens" lens: ${JSON.stringify(lenses)}`);
    }
    log(`lenses ok: ${JSON.stringify(lenses)}`);

    // 4. The whole loop from the editor: the program changed (its hot comprehension makes half
    // the entries), then "memlens: Run Current File" makes and loads a new run.
    if (!process.env.MEMLENS_E2E_SKIP_RUN) {
      const original = fs.readFileSync(ctx.file, 'utf8');
      if (!original.includes('for i in range(40)')) {
        fail('examples/leaky_cache.py changed: the e2e edits its "for i in range(40)"');
      }
      fs.writeFileSync(ctx.file, original.replace('for i in range(40)', 'for i in range(20)'));
      await waitFor(async () => (await lineText(page, 'for i in range(20)')) !== '', 'the edited file in the editor');
      const before = new Set(runFiles(workspace));
      await runFromPalette(page, 'memlens: Run Current File');
      const runEnd = Date.now() + TIMEOUT_MS;
      let added = [];
      while (Date.now() < runEnd && added.length === 0) {
        await page.waitForTimeout(1000);
        added = runFiles(workspace).filter((f) => !before.has(f));
      }
      if (added.length === 0) {
        fail('"memlens: Run Current File" made no new run');
      }
      log(`run command ok: new run ${path.basename(added[0], '.mlrun')}`);
      // The program ran in a terminal (a task): its output is there.
      const terminal = page.locator('.terminal-wrapper, .xterm').first();
      const terminalShown = await terminal.isVisible().catch(() => false);
      log(`the program ran in a terminal: ${terminalShown ? 'shown' : 'not shown'}`);
      // The status bar follows (memlens/runLoaded): a fresh run is seconds old.
      const statusEnd = Date.now() + 30_000;
      let after = '';
      while (Date.now() < statusEnd) {
        after = await statusText(page);
        if (/peak · \d+s ago/.test(after)) {
          break;
        }
        await page.waitForTimeout(1000);
      }
      if (!/peak · \d+s ago/.test(after)) {
        fail(`status bar did not show the new run: ${JSON.stringify(after)}`);
      }
      log('status bar follows the new run');

      // 5. Baseline: pick the first run; the status bar compares, then the hints do.
      await runFromPalette(page, 'memlens: Set Baseline Run');
      const picker = page.locator('.quick-input-widget input').first();
      await page.locator('.quick-input-list .monaco-list-row', { hasText: want.run_id }).first().waitFor({ state: 'visible' });
      await picker.fill(want.run_id);
      await page.waitForTimeout(500);
      await picker.press('Enter');
      await waitFor(async () => /vs baseline [+−±]/.test(await statusText(page)), 'the status bar to show the baseline');
      log(`baseline ok: ${JSON.stringify((await statusText(page)).match(/[^\n]*vs baseline[^\n]*/)[0].trim())}`);
      await runFromPalette(page, 'memlens: Compare With Baseline');
      const cmp = expectedComparison(workspace, ctx.file, want.line);
      log(`expect comparison "${cmp.label}", ${cmp.changes.length} coloured lines: ${JSON.stringify(cmp.changes)}`);
      if (cmp.changes.length === 0 || cmp.hints.some((h) => h.length > 43)) {
        fail(`the comparison is not the one this test is about: ${JSON.stringify(cmp)}`);
      }
      const diff = await waitForHint(page, want.source, cmp.label);
      log(`compare ok: ${JSON.stringify(diff.slice(diff.lastIndexOf('}') + 1).trim())}`);
      // Colours: only the lines that really changed are tinted (decorations; the unchanged
      // lines, within the noise, are not), and nothing went to the project's settings.
      await page.keyboard.press('Control+Home');
      const coloured = async () => (await page.$$('.monaco-editor .view-overlays div[class*="ced-"]')).length;
      await waitFor(async () => (await coloured()) === cmp.changes.length, `${cmp.changes.length} coloured lines`);
      await page.waitForTimeout(1500);
      if ((await coloured()) !== cmp.changes.length) {
        fail(`${await coloured()} coloured lines, not ${cmp.changes.length}`);
      }
      log(`colours ok: ${cmp.changes.length} lines`);
      if (fs.existsSync(path.join(workspace, '.vscode', 'settings.json'))) {
        fail('Compare With Baseline wrote .vscode/settings.json into the project');
      }
      await page.waitForTimeout(1000);
      await screenshot(page, runDir, 'vscode-compare');
      await runFromPalette(page, 'memlens: Compare With Baseline');
      await waitForHint(page, want.source, ' at peak · ');

      // The timeline view: the SVG with the peak marked, the lines held most at the peak.
      await page.locator('.monaco-editor .view-lines').first().click();
      await page.keyboard.press('Control+Home');
      await runFromPalette(page, 'memlens: Show Timeline');
      const frame = await waitForTimelineFrame(page);
      log(`timeline ok: ${JSON.stringify(frame)}`);
      await page.locator('.monaco-editor .view-lines').first().click();
      await page.keyboard.press('Control+Home');
      await page.waitForTimeout(1000);
      await screenshot(page, runDir, 'vscode-timeline');

      // The timeline is a control: a click at 30% of the run shows each line's live bytes then
      // (the leaky cache is still filling: its line holds less than at the peak). The run shown
      // is the edited program's.
      const shownRun = expectedFigures(workspace, ctx.file);
      const chart = await clickTimeline(page, 0.3);
      let scrubbed = '';
      await waitFor(async () => / live at \d+\.\d\d s/.test((scrubbed = await lineText(page, shownRun.source))), 'the hint at the moment clicked');
      const at = scrubbed.match(/([\d.]+ (?:B|KiB|MiB)) live at (\d+\.\d\d s)/);
      if (!at || at[1] === shownRun.peak) {
        fail(`the hint at a moment does not show that moment's bytes: ${JSON.stringify(scrubbed)}`);
      }
      await waitFor(async () => (await statusText(page)).includes(`· at ${at[2]}`), 'the status bar to name the moment');
      await waitFor(async () => (await shownOnTimeline(chart)).includes(`live bytes at ${at[2]}`), 'the timeline to say which moment');
      log(`timeline scrub ok: ${JSON.stringify(at[0])}; status bar: ${JSON.stringify((await statusText(page)).match(/[^\n]*· at [^\n]*/)[0].trim())}`);
      // The hover says which moment, and pictures the line over the run.
      const momentHover = await hoverLine(page, shownRun.source);
      for (const part of [`${at[1]} live at ${at[2]}`, `Shown: the moment ${at[2]}`, 'Live over the run:']) {
        if (!momentHover.includes(part)) {
          fail(`hover at the moment lacks ${JSON.stringify(part)}: ${JSON.stringify(momentHover)}`);
        }
      }
      await page.mouse.move(5, 5);
      await page.keyboard.press('Escape');
      await page.waitForTimeout(500);
      await screenshot(page, runDir, 'vscode-moment');
      // Jump to Peak: the heaviest line at the peak, the peak's figures.
      await runFromPalette(page, 'memlens: Jump to Peak');
      await waitForHint(page, shownRun.source, `${shownRun.peak} at peak`);
      await waitFor(async () => (await statusText(page)).includes('· at peak'), 'the status bar to say "at peak"');
      log('jump to peak ok');
      // Back to the whole run's figures.
      await runFromPalette(page, 'memlens: Show Whole-Run Figures');
      await waitForHint(page, shownRun.source, shownRun.label);
      await waitFor(async () => !(await statusText(page)).includes('· at '), 'the status bar to leave the moment');
      log('whole-run figures ok');
      // The view stays open beside the editor (the editor has the focus: no Ctrl+W here).

      // 6. Toggle Annotations hides the hints and brings them back.
      await runFromPalette(page, 'memlens: Toggle Annotations');
      await waitFor(async () => !(await lineText(page, want.source)).includes(' at peak · '), 'the hints to go away');
      await runFromPalette(page, 'memlens: Toggle Annotations');
      await waitForHint(page, want.source, ' at peak · ');
      if (fs.existsSync(path.join(workspace, '.vscode', 'settings.json'))) {
        fail('Toggle Annotations wrote .vscode/settings.json into the project');
      }
      log('toggle annotations ok');

      // 7. A test suite's run beside the program's: pytest --memlens makes the newest run, yet
      // the program keeps its own run (and baseline); the test file shows the test run, and
      // the status bar says which run each file shows.
      fs.writeFileSync(path.join(workspace, 'test_leaky.py'), TEST_FILE);
      execFileSync(PYTHON, ['-m', 'pytest', '--memlens', '-p', 'no:cacheprovider', '-q', 'test_leaky.py'], {
        cwd: workspace,
        stdio: ['ignore', 'ignore', 'pipe'],
      });
      await openFile(page, 'test_leaky.py');
      await waitFor(async () => /pytest [\d.]+ (B|KiB|MiB) peak/.test(await statusText(page)), 'the status bar to show the test run');
      const testLenses = await lensesAtEnd(page, (l) => l.some((t) => /^test peak /.test(t.trim())));
      if (!testLenses.some((t) => /^test peak /.test(t.trim()))) {
        fail(`no test lens: ${JSON.stringify(testLenses)}`);
      }
      log(`test run ok: ${JSON.stringify((await statusText(page)).match(/[^\n]*pytest[^\n]*/)[0].trim())}, lenses ${JSON.stringify(testLenses)}`);
      await openFile(page, 'leaky_cache.py');
      await waitFor(async () => /leaky_cache\.py [\d.]+ (B|KiB|MiB) peak .* vs baseline/.test(await statusText(page)), 'the status bar to show the program run again');
      await waitForHint(page, want.source, ' at peak · ');
      log(`program run kept: ${JSON.stringify((await statusText(page)).match(/[^\n]*leaky_cache\.py[^\n]*/)[0].trim())}`);
    }
  } catch (err) {
    await failWithScreenshot(page, runDir, 'trusted', err);
  } finally {
    await close(page);
  }
}

/** Restricted mode: existing runs are shown, nothing runs (palette command, code lens). */
async function untrustedSession(ctx) {
  const { runDir, workspace, want } = ctx;
  const { page, close } = await openSession(ctx, false);
  try {
    const restricted = await page.locator('.statusbar').innerText();
    if (!/Restricted Mode/i.test(restricted)) {
      fail(`the workspace is not in Restricted Mode: ${JSON.stringify(norm(restricted))}`);
    }
    // The hint line may show a newer run (step 4 above) whose label differs: wait for any label.
    const label = (await waitForHint(page, want.source, ' at peak · ')).split(want.source.slice(-10)).pop().trim();
    log(`untrusted: inlay hint shown: ${JSON.stringify(label)}`);
    const lenses = await lensesAtEnd(page, (l) => l.some((t) => /Run under memlens/.test(t)));
    if (!lenses.some((t) => /memlens: .*peak/.test(t))) {
      fail(`untrusted: no figure code lens: ${JSON.stringify(lenses)}`);
    }
    if (lenses.some((t) => /Run under memlens/.test(t))) {
      fail(`untrusted: the "Run under memlens" lens is offered: ${JSON.stringify(lenses)}`);
    }
    log(`untrusted: lenses ${JSON.stringify(lenses.map(norm))}`);
    const before = new Set(runFiles(workspace));
    const offered = await runFromPalette(page, 'memlens: Run Current File', { optional: true });
    log(`untrusted: Run Current File ${offered ? 'offered (and refused)' : 'not offered'} in the palette`);
    await page.waitForTimeout(8000);
    const added = runFiles(workspace).filter((f) => !before.has(f));
    if (added.length > 0) {
      fail(`untrusted: "memlens: Run Current File" ran the program (${added.join(', ')})`);
    }
    log('untrusted: Run Current File did not run anything');
  } catch (err) {
    await failWithScreenshot(page, runDir, 'untrusted', err);
  } finally {
    await close(page);
  }
}

main().catch((err) => {
  if (!process.exitCode) {
    log(`FAIL: ${err && err.stack ? err.stack : err}`);
    process.exitCode = 1;
  }
});
