// The notebook part of the end-to-end test (called by run.js): a Jupyter notebook whose first
// cell was profiled with %%memlens in a real IPython process (as a kernel would run it), opened
// in VS Code's notebook editor; the cell's keeping line must show its inlay hint, and the
// cell its lens. Screenshot: vscode-notebook.png (docs/notebooks.md).
'use strict';

const { execFileSync } = require('child_process');
const fs = require('fs');
const path = require('path');

const CELLS = [
  ['code', '%%memlens\nkeep = bytearray(10_000_000)\ntmp = bytearray(5_000_000)\ndel tmp\nlen(keep)'],
  ['code', "print(f'{len(keep):,} bytes kept')"],
];

/** Writes analysis.ipynb (nbformat 4) into `folder` and profiles its first cell there. */
function makeNotebook(folder, python) {
  const file = path.join(folder, 'analysis.ipynb');
  const cells = CELLS.map(([kind, source], i) => ({
    cell_type: kind,
    id: `cell-${i}`,
    metadata: {},
    source: source.split(/(?<=\n)/),
    ...(kind === 'code' ? { execution_count: null, outputs: [] } : {}),
  }));
  const nb = { cells, metadata: { language_info: { name: 'python' } }, nbformat: 4, nbformat_minor: 5 };
  fs.writeFileSync(file, JSON.stringify(nb, null, 1));
  // The kernel's side: IPython runs the cell as Jupyter sends it (its code), in the
  // notebook's folder; the run goes to that folder's store.
  const script = `
import sys
from IPython.core.interactiveshell import InteractiveShell
shell = InteractiveShell.instance()
shell.run_cell("%load_ext memlens", store_history=True)
code = sys.argv[1]
shell.parent_header = {"content": {"code": code}, "metadata": {}}
shell.user_ns["__vsc_ipynb_file__"] = sys.argv[2]
result = shell.run_cell(code, store_history=True)
sys.exit(0 if result.success else 1)
`;
  const out = execFileSync(python, ['-c', script, CELLS[0][1], file], { cwd: folder, encoding: 'utf8' });
  const live = out.split('\n').find((l) => /In \[\d+\]:2\s/.test(l));
  return { file, report: live ? live.trim() : out };
}

/** The expected hint on the keeping line, computed with memlens itself from the run. */
function expectedHint(workspace, python) {
  const script = `
import json, sys
from memlens.annotate import line_label
from memlens.runfile import reader
from memlens.store import Store
run = reader.read(Store(sys.argv[1]).latest())
cell = run.info.cell
print(json.dumps({"label": line_label(run.files[cell.file].lines[2], "peak"), "file": cell.file}))
`;
  return JSON.parse(execFileSync(python, ['-c', script, workspace], { encoding: 'utf8' }));
}

async function notebookSession(ctx, h) {
  const { runDir, workspace } = ctx;
  // In a folder of its own, as notebooks often are: the kernel runs there, and so its store is
  // there too (the workspace's runs stay as they were).
  const folder = path.join(workspace, 'notebooks');
  fs.mkdirSync(folder, { recursive: true });
  const made = makeNotebook(folder, h.PYTHON);
  h.log(`notebook: the kernel's report: ${made.report}`);
  const want = expectedHint(folder, h.PYTHON);
  h.log(`notebook: expect "${want.label}" on the keeping line of ${want.file}`);
  const { page, close } = await h.openSession(ctx, true);
  try {
    await h.openFile(page, 'analysis.ipynb', '.notebook-editor .monaco-editor .view-lines');
    const line = await h.waitForHint(page, 'keep = bytearray(10_000_000)', want.label);
    h.log(`notebook: inlay hint ok: ${JSON.stringify(line)}`);
    // The cell's lens: its totals.
    let lenses = [];
    await h.waitFor(async () => {
      lenses = await page.$$eval('.notebook-editor .codelens-decoration', (els) =>
        els.map((e) => (e.textContent || '').replace(/\u00a0/g, ' ')),
      );
      return lenses.some((t) => t.startsWith(`memlens: ${want.file} ·`) && / kept /.test(t));
    }, 'the cell lens');
    h.log(`notebook: lens ok: ${JSON.stringify(lenses.filter((t) => t.startsWith('memlens:')))}`);
    await page.mouse.move(5, 5);
    await page.waitForTimeout(500);
    await h.screenshot(page, runDir, 'vscode-notebook');
  } catch (err) {
    await h.failWithScreenshot(page, runDir, 'notebook', err);
  } finally {
    await close(page);
  }
}

module.exports = { notebookSession };
