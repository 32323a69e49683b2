// What the client commands do, written against small interfaces so that unit tests can drive
// them with fakes. Figures always come from the server; the client only asks and shows.
import { runPickItems, ListedRun } from './runs';
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
): Promise<string | undefined> {
  const runs = ((await link.execute('memlens.listRuns', [{}])) as ListedRun[] | null) ?? [];
  if (runs.length === 0) {
    await api.showInfo('memlens: no runs yet. Use "memlens: Run Current File" first.');
    return undefined;
  }
  const placeHolder = action === 'baseline' ? 'Choose the baseline run' : 'Choose the run to show';
  const picked = await api.showQuickPick(runPickItems(runs), placeHolder);
  if (!picked) {
    return undefined;
  }
  await link.execute(action === 'baseline' ? 'memlens.setBaseline' : 'memlens.chooseRun', [{ run: picked.run }]);
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

export function summaryText(summary: {
  run: { id: string; peak_traced_bytes: number } | null;
  baseline: { id: string } | null;
  top: SummaryTop[];
}): string {
  if (!summary.run) {
    return 'memlens: no run loaded.';
  }
  const lines = [`memlens run ${summary.run.id}${summary.baseline ? ` (baseline ${summary.baseline.id})` : ''}`];
  for (const t of summary.top.slice(0, 5)) {
    lines.push(`${t.file.split(/[\\/]/).pop()}:${t.line}  ${t.label}`);
  }
  return lines.join('\n');
}
