// What the client commands do, written against small interfaces so that unit tests can drive
// them with fakes. Figures always come from the server; the client only asks and shows.
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
  const runs = ((await link.execute('memlens.listRuns', [where])) as ListedRun[] | null) ?? [];
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
    await link.execute('memlens.clearBaseline', [where]);
    return '';
  }
  await link.execute(action === 'baseline' ? 'memlens.setBaseline' : 'memlens.chooseRun', [{ run: picked.run, ...where }]);
  return picked.run;
}

export interface SummaryTop {
  file: string;
  line: number;
  label: string;
}

export interface SummaryResult {
  run: { id: string; peak_traced_bytes: number } | null;
  baseline: { id: string; peak_traced_bytes: number } | null;
  top: SummaryTop[];
}

export function summaryText(summary: SummaryResult): string {
  if (!summary.run) {
    return 'memlens: no run loaded.';
  }
  const base = summary.baseline
    ? ` (baseline ${summary.baseline.id}: ${formatBytes(summary.baseline.peak_traced_bytes)} peak)`
    : '';
  const lines = [`memlens run ${summary.run.id}: ${formatBytes(summary.run.peak_traced_bytes)} peak${base}`];
  for (const t of summary.top) {
    lines.push(`${t.file.split(/[\\/]/).pop()}:${t.line}  ${t.label}`);
  }
  return lines.join('\n');
}

export interface SummaryPickItem {
  label: string;
  description: string;
  file: string;
  line: number;
}

/** The heaviest lines of the summary as quick-pick items (picking one opens the line). */
export function summaryPickItems(summary: SummaryResult): SummaryPickItem[] {
  return summary.top.map((t) => ({
    label: `${t.file.split(/[\\/]/).pop()}:${t.line}`,
    description: t.label,
    file: t.file,
    line: t.line,
  }));
}

/** memlens: Show Run Summary — the run, its baseline and its heaviest lines; opens a picked line. */
export async function showSummary(api: VsCodeApi, link: ServerLink, workspace?: string): Promise<string> {
  const summary = (await link.execute('memlens.summary', [workspace ? { workspace } : {}])) as SummaryResult | null;
  if (!summary || !summary.run) {
    const text = summaryText({ run: null, baseline: null, top: [] });
    await api.showInfo(text);
    return text;
  }
  const title = summaryText({ ...summary, top: [] });
  const picked = await api.showQuickPick(summaryPickItems(summary), title);
  if (picked) {
    await api.openLocation(picked.file, picked.line);
  }
  return title;
}
