// What the client commands do, written against small interfaces so that unit tests can drive
// them with fakes. Figures always come from the server; the client only asks and shows.
import { CHOOSE_RUN, CLEAR_BASELINE, LIST_RUNS, SET_BASELINE, SUMMARY } from './protocol';
import { baselinePickItems, ListedRun, runPickItems } from './runs';
import { formatBytes } from './status';
import { mayRunCode, UNTRUSTED_MESSAGE } from './trust';
import { VsCodeApi } from './vscodeapi';

/** Sends workspace/executeCommand to the memlens server. */
export interface ServerLink {
  execute(command: string, args: unknown[]): Promise<unknown>;
}

/** How to run a file under memlens: the process the terminal (a task) starts. */
export interface RunSpec {
  command: string;
  args: string[];
  cwd: string;
}

/**
 * The process that runs `file` under memlens in its workspace folder `folder` (both paths), or
 * undefined, with the reason shown, when it must not run: an untrusted workspace, no file, a
 * file outside every workspace folder (its run would need a store elsewhere), no interpreter.
 */
export function runSpec(
  api: VsCodeApi,
  interpreter: string | undefined,
  file: string | undefined,
  folder: string | undefined,
  args: string[],
): RunSpec | undefined {
  if (!mayRunCode(api.isTrusted())) {
    void api.showError(UNTRUSTED_MESSAGE);
    return undefined;
  }
  if (!file) {
    void api.showError('memlens: open a Python file to run it.');
    return undefined;
  }
  if (!folder) {
    void api.showError(`memlens: ${file} is outside every workspace folder; open its folder to run it.`);
    return undefined;
  }
  if (!interpreter) {
    void api.showError('memlens: the server is not running (see the memlens output)');
    return undefined;
  }
  return { command: interpreter, args: ['-m', 'memlens', 'run', file, ...args], cwd: folder };
}

/** Splits an argument line the way a POSIX shell would for simple quoting. */
export function splitArgs(line: string): string[] {
  const out: string[] = [];
  let current = '';
  let quote: '"' | "'" | null = null;
  let has = false;
  for (let i = 0; i < line.length; i++) {
    const ch = line[i];
    if (quote) {
      if (ch === quote) {
        quote = null;
      } else if (ch === '\\' && quote === '"' && i + 1 < line.length) {
        current += line[++i];
      } else {
        current += ch;
      }
    } else if (ch === '"' || ch === "'") {
      quote = ch;
      has = true;
    } else if (/\s/.test(ch)) {
      if (has || current) {
        out.push(current);
      }
      current = '';
      has = false;
    } else if (ch === '\\' && i + 1 < line.length) {
      current += line[++i];
      has = true;
    } else {
      current += ch;
      has = true;
    }
  }
  if (has || current) {
    out.push(current);
  }
  return out;
}

/** Lets the user pick a run, then shows it (chooseRun) or makes it the baseline. */
export async function pickRun(
  api: VsCodeApi,
  link: ServerLink,
  action: 'baseline' | 'show',
  workspace?: string,
): Promise<string | undefined> {
  const where = workspace ? { workspace } : {};
  const runs = ((await link.execute(LIST_RUNS, [where])) as ListedRun[] | null) ?? [];
  const items = action === 'baseline' ? baselinePickItems(runs) : runPickItems(runs);
  if (items.length === 0) {
    await api.showInfo('memlens: no runs yet. Use "memlens: Run Current File" first.');
    return undefined;
  }
  const placeHolder = action === 'baseline' ? 'Choose the baseline run' : 'Choose the run to show';
  const picked = await api.showQuickPick(items, placeHolder);
  if (!picked) {
    return undefined;
  }
  if (picked.clear) {
    await link.execute(CLEAR_BASELINE, [picked.kind ? { ...where, kind: picked.kind } : where]);
    return '';
  }
  await link.execute(action === 'baseline' ? SET_BASELINE : CHOOSE_RUN, [{ run: picked.run, ...where }]);
  return picked.run;
}

export interface SummaryTop {
  file: string;
  line: number;
  label: string;
  /** The line's code as profiled. */
  text?: string;
  /** With a baseline: the change in bytes, null when the line is new since the baseline. */
  delta?: number | null;
}

export interface SummaryGone {
  file: string;
  baselineLine: number;
  text: string;
  label: string;
}

export interface SummaryResult {
  run: { id: string; peak_traced_bytes: number; kind?: string; checkpoint?: boolean } | null;
  baseline: { id: string; peak_traced_bytes: number } | null;
  delta?: number | null;
  top: SummaryTop[];
  gone?: SummaryGone[];
}

const baseName = (file: string): string => file.split(/[\\/]/).pop() ?? file;

/** A change in bytes as the server writes it: `+1.0 MiB`, `−12.0 MiB`, `±0 B`. */
export function formatDelta(delta: number): string {
  const sign = delta > 0 ? '+' : delta < 0 ? '−' : '±';
  return `${sign}${formatBytes(Math.abs(delta))}`;
}

function changeText(delta: number | null | undefined): string {
  if (delta === undefined) {
    return '';
  }
  return delta === null ? 'new since baseline' : delta === 0 ? 'same as baseline' : `${formatDelta(delta)} vs baseline`;
}

/** One short line (a quick pick title is cut when long): the run, its peak, the change. */
export function summaryText(summary: SummaryResult): string {
  if (!summary.run) {
    return 'memlens: no run loaded.';
  }
  const run = summary.run;
  const delta = run.checkpoint
    ? ' (in progress: not compared)'
    : summary.baseline
      ? `, ${changeText(summary.delta ?? run.peak_traced_bytes - summary.baseline.peak_traced_bytes)}`
      : '';
  const what = run.kind === 'tests' ? 'test run' : 'run';
  return `memlens ${what} ${run.id}: ${formatBytes(run.peak_traced_bytes)} peak${delta}`;
}

export interface SummaryPickItem {
  label: string;
  description: string;
  detail?: string;
  file: string;
  line: number;
}

/**
 * The heaviest lines of the summary as quick-pick items, with their change against the
 * baseline; then the baseline's lines whose code is gone. Picking one opens the line.
 */
export function summaryPickItems(summary: SummaryResult): SummaryPickItem[] {
  const items: SummaryPickItem[] = summary.top.map((t) => {
    const change = changeText(t.delta);
    return {
      label: `${baseName(t.file)}:${t.line}`,
      description: change ? `${t.label} · ${change}` : t.label,
      ...(t.text ? { detail: t.text } : {}),
      file: t.file,
      line: t.line,
    };
  });
  for (const g of summary.gone ?? []) {
    items.push({
      label: `$(trash) ${baseName(g.file)}, baseline line ${g.baselineLine}`,
      description: `gone since baseline: held ${g.label}`,
      detail: g.text,
      file: g.file,
      line: 1,
    });
  }
  return items;
}

/**
 * memlens: Show Run Summary — the run shown for `uri` (the active file: a program's run, or a
 * test suite's), its baseline and its heaviest lines with their code; opens a picked line.
 */
export async function showSummary(api: VsCodeApi, link: ServerLink, workspace?: string, uri?: string): Promise<string> {
  const args = { ...(workspace ? { workspace } : {}), ...(uri ? { uri } : {}) };
  const summary = (await link.execute(SUMMARY, [args])) as SummaryResult | null;
  if (!summary || !summary.run) {
    const text = summaryText({ run: null, baseline: null, top: [] });
    await api.showInfo(text);
    return text;
  }
  const title = summaryText(summary);
  const picked = await api.showQuickPick(summaryPickItems(summary), title);
  if (picked) {
    await api.openLocation(picked.file, picked.line);
  }
  return title;
}
