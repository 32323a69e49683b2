// The status bar text for the loaded run and baseline (from memlens/runLoaded).

/** RunSummary of the LSP contract (docs/lsp.md); `command` is the shell-quoted command line. */
export interface RunSummary {
  id: string;
  path: string;
  started: string;
  command: string;
  peak_traced_bytes: number;
  duration_s: number;
  complete: boolean;
  mode?: string;
  /** The run's GPU memory peak (PyTorch CUDA); 0 or absent without GPU memory. */
  gpu_peak_bytes?: number;
}

export interface RunLoaded {
  workspace?: string;
  run: RunSummary | null;
  baseline: RunSummary | null;
  /** Why the run the folder should show could not be loaded (an unreadable latest run). */
  problem?: string | null;
}

const UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

export function formatBytes(n: number): string {
  if (Math.abs(n) < 1024) {
    return `${Math.round(n)} B`;
  }
  let value = Math.abs(n);
  let unit = 0;
  while (value >= 1024 && unit < UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return `${n < 0 ? '-' : ''}${value.toFixed(1)} ${UNITS[unit]}`;
}

export function formatAge(startedIso: string, now: Date): string {
  const started = Date.parse(startedIso);
  if (Number.isNaN(started)) {
    return '';
  }
  const seconds = Math.max(0, Math.round((now.getTime() - started) / 1000));
  if (seconds < 60) {
    return `${seconds}s ago`;
  }
  const minutes = Math.round(seconds / 60);
  if (minutes < 60) {
    return `${minutes}m ago`;
  }
  const hours = Math.round(minutes / 60);
  return hours < 48 ? `${hours}h ago` : `${Math.round(hours / 24)}d ago`;
}

export function statusText(state: RunLoaded | undefined, now: Date): { text: string; tooltip: string } {
  if (state && !state.run && state.problem) {
    return { text: '$(warning) memlens: run unreadable', tooltip: `${state.problem}\nClick to choose another run.` };
  }
  if (!state || !state.run) {
    return { text: '$(pulse) memlens: no run', tooltip: 'No memlens run yet. Click to choose one.' };
  }
  const run = state.run;
  const incomplete = run.complete ? '' : ' (incomplete)';
  const gpu = run.gpu_peak_bytes ? ` · GPU ${formatBytes(run.gpu_peak_bytes)}` : '';
  let text = `$(pulse) ${formatBytes(run.peak_traced_bytes)} peak${gpu} · ${formatAge(run.started, now)}${incomplete}`;
  let tooltip = `memlens run ${run.id}: ${run.command}`;
  if (state.baseline) {
    const delta = run.peak_traced_bytes - state.baseline.peak_traced_bytes;
    const sign = delta > 0 ? '+' : delta < 0 ? '−' : '±';
    text += ` · vs baseline ${sign}${formatBytes(Math.abs(delta))}`;
    tooltip += `\nbaseline ${state.baseline.id}: ${formatBytes(state.baseline.peak_traced_bytes)} peak`;
  }
  return { text, tooltip: `${tooltip}\nClick to choose a run.` };
}
