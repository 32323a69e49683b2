// Quick-pick items for the runs the server lists (memlens.listRuns).
import { formatBytes } from './status';

/** One entry of memlens.listRuns; figures are null for a run file that cannot be read. */
export interface ListedRun {
  id: string;
  path: string;
  started: string | null;
  command: string | null;
  peak_traced_bytes: number | null;
  duration_s: number | null;
  complete: boolean | null;
  isBaseline: boolean;
  isLoaded: boolean;
  error?: string | null;
}

export interface RunPickItem {
  label: string;
  description: string;
  detail: string;
  run: string;
}

export function runPickItems(runs: ListedRun[]): RunPickItem[] {
  return [...runs]
    .sort((a, b) => (a.id < b.id ? 1 : a.id > b.id ? -1 : 0)) // ids start with the UTC start time
    .map((r) => {
      const label = `${r.isLoaded ? '$(eye) ' : ''}${r.isBaseline ? '$(pin) ' : ''}${r.id}`;
      if (r.peak_traced_bytes === null || r.duration_s === null) {
        return { label, description: 'unreadable', detail: r.error ?? '', run: r.path };
      }
      const marks = [r.isLoaded ? 'shown' : '', r.isBaseline ? 'baseline' : '', r.complete === false ? 'incomplete' : '']
        .filter(Boolean)
        .join(', ');
      return {
        label,
        description: `${formatBytes(r.peak_traced_bytes)} peak · ${r.duration_s.toFixed(2)} s${marks ? ` · ${marks}` : ''}`,
        detail: r.command ?? '',
        run: r.path,
      };
    });
}
