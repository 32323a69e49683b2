// Quick-pick items for the runs the server lists (memlens.listRuns).
import { formatAge, formatBytes } from './status';

/** One entry of memlens.listRuns (docs/lsp.md). An unreadable run file has nulls and `error`. */
export interface ListedRun {
  id: string;
  path: string;
  started: string | null;
  command: string | null;
  peak_traced_bytes: number | null;
  duration_s: number | null;
  complete: boolean | null;
  /** 'program' or 'tests' (null when unreadable): each kind has its own baseline. */
  kind?: string | null;
  isBaseline: boolean;
  isLoaded: boolean;
  error?: string | null;
}

export interface RunPickItem {
  label: string;
  description: string;
  detail: string;
  /** What the server gets back: the run's path, or '' for "clear the baseline". */
  run: string;
  clear?: boolean;
  /** For "clear the baseline": the kind of runs whose baseline goes. */
  kind?: string;
}

const KIND_WORDS: Record<string, string> = { program: 'program runs', tests: 'test runs' };

/**
 * The runs newest first (ids start with the UTC start time), the shown run and the baseline
 * marked; a run file that cannot be read is listed as "unreadable" with the reason.
 */
export function runPickItems(runs: ListedRun[], now: Date = new Date()): RunPickItem[] {
  return [...runs]
    .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0))
    .map((r) => {
      const label = `${r.isLoaded ? '$(eye) ' : ''}${r.isBaseline ? '$(pin) ' : ''}${r.id}`;
      if (r.error || r.peak_traced_bytes === null || r.duration_s === null) {
        return { label, description: 'unreadable', detail: r.error ?? '', run: r.path };
      }
      const marks = [
        r.kind === 'tests' ? 'test run' : '',
        r.isLoaded ? 'shown' : '',
        r.isBaseline ? 'baseline' : '',
        r.complete === false ? 'incomplete' : '',
      ]
        .filter(Boolean)
        .join(', ');
      const age = r.started ? formatAge(r.started, now) : '';
      const parts = [`${formatBytes(r.peak_traced_bytes)} peak`, `${r.duration_s.toFixed(2)} s`, age, marks].filter(Boolean);
      return { label, description: parts.join(' · '), detail: r.command ?? '', run: r.path };
    });
}

/**
 * The baseline picker: the runs (a run becomes the baseline of its kind: program runs or test
 * runs), plus "clear the baseline" first for each kind that has one.
 */
export function baselinePickItems(runs: ListedRun[], now: Date = new Date()): RunPickItem[] {
  const items = runPickItems(runs, now);
  const kinds = [...new Set(runs.filter((r) => r.isBaseline).map((r) => r.kind ?? 'program'))].sort().reverse();
  for (const kind of kinds) {
    const words = KIND_WORDS[kind] ?? kind;
    items.unshift({ label: `$(close) No baseline for ${words}`, description: `clear the baseline of ${words}`, detail: '', run: '', clear: true, kind });
  }
  return items;
}
