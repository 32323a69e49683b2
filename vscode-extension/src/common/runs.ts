// Quick-pick items for the runs the server lists (memlens.listRuns).
import { formatBytes } from './status';

export interface ListedRun {
  id: string;
  path: string;
  started: string;
  command: string[];
  peak_traced_bytes: number;
  duration_s: number;
  complete: boolean;
  isBaseline: boolean;
  isLoaded: boolean;
}

export interface RunPickItem {
  label: string;
  description: string;
  detail: string;
  run: string;
}

export function runPickItems(runs: ListedRun[]): RunPickItem[] {
  return [...runs]
    .sort((a, b) => (a.started < b.started ? 1 : a.started > b.started ? -1 : 0))
    .map((r) => {
      const marks = [r.isLoaded ? 'shown' : '', r.isBaseline ? 'baseline' : '', r.complete ? '' : 'incomplete']
        .filter(Boolean)
        .join(', ');
      return {
        label: `${r.isLoaded ? '$(eye) ' : ''}${r.isBaseline ? '$(pin) ' : ''}${r.id}`,
        description: `${formatBytes(r.peak_traced_bytes)} peak · ${r.duration_s.toFixed(2)} s${marks ? ` · ${marks}` : ''}`,
        detail: r.command.join(' '),
        run: r.path,
      };
    });
}
