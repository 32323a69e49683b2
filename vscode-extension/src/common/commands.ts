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

export interface RunResult {
  exitCode: number;
  run: string | null;
}

/** Runs a file under memlens (the caller wraps this in a cancellable progress notification). */
export async function runFile(
  api: VsCodeApi,
  link: ServerLink,
  uri: string | undefined,
  args: string[],
): Promise<RunResult | undefined> {
  if (!mayRunCode(api.isTrusted())) {
    await api.showError(UNTRUSTED_MESSAGE);
    return undefined;
  }
  if (!uri) {
    await api.showError('memlens: open a Python file to run it.');
    return undefined;
  }
  const result = (await link.execute('memlens.runFile', [{ uri, args }])) as RunResult | null;
  if (!result) {
    return undefined;
  }
  if (result.exitCode !== 0) {
    await api.showInfo(`memlens: the program exited with code ${result.exitCode}; its run is shown.`);
  }
  return result;
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

/** Flips a boolean setting and returns its new value. */
export async function toggleSetting(api: VsCodeApi, key: string, fallback: boolean): Promise<boolean> {
  const next = !api.getSetting<boolean>(key, fallback);
  await api.updateSetting(key, next);
  return next;
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
