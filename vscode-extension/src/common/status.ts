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
  /** 'program' (memlens run) or 'tests' (pytest --memlens): each kind has its own latest run and baseline. */
  kind?: string;
  /** A checkpoint: the run so far of a program still running (never compared with the baseline). */
  checkpoint?: boolean;
  /** The run's GPU memory peak (PyTorch CUDA); 0 or absent without GPU memory. */
  gpu_peak_bytes?: number;
}

/** MomentInfo of the LSP contract: the moment hints, hovers and lenses show (memlens.setMoment). */
export interface MomentInfo {
  kind: 'peak' | 'end' | 'time';
  /** `peak`, `end` or `0.25 s`. */
  name: string;
  spec: string;
  t: number | null;
  traced_bytes: number;
}

/** What a folder shows of one kind of run. */
export interface RunLoaded {
  workspace?: string;
  /** 'program' or 'tests' (set by the client: see splitLoaded). */
  kind?: string;
  run: RunSummary | null;
  baseline: RunSummary | null;
  /** Why the run the folder should show could not be loaded (an unreadable latest run). */
  problem?: string | null;
  /** The moment shown, or null: the run's own figures. */
  moment?: MomentInfo | null;
}

/** memlens/runLoaded: the program runs (as before kinds), and the test runs under `tests`. */
export interface RunLoadedParams extends RunLoaded {
  tests?: RunLoaded;
}

/** The states of one runLoaded notification: the program runs', then the test runs'. */
export function splitLoaded(params: RunLoadedParams): RunLoaded[] {
  const { tests, ...program } = params;
  const out: RunLoaded[] = [{ ...program, kind: 'program' }];
  if (tests) {
    out.push({ ...tests, workspace: params.workspace, kind: 'tests' });
  }
  return out;
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

/** What the run is, in a word: the script it ran (`leaky_cache.py`, `-m pkg.tool`), or `pytest`. */
export function runName(run: RunSummary): string {
  if (run.kind === 'tests') {
    return 'pytest';
  }
  const module = /(?:^|\s)-m\s+([\w.]+)/.exec(run.command);
  if (module) {
    return `-m ${module[1]}`;
  }
  // The script: the first word ending in .py, quoted or not (the command is shell-quoted).
  const script = /'([^']*\.py)'|"([^"]*\.py)"|(\S+\.py)(?=\s|$)/.exec(run.command);
  const path = script ? (script[1] ?? script[2] ?? script[3]) : run.id;
  return path.split(/[\\/]/).pop() || path;
}

/**
 * The status bar for the run shown: which run (the script, or `pytest` for a test suite's run),
 * its peak and age, and the change of the peak against the baseline of its kind. A checkpoint
 * of a run still going is marked "in progress" and never compared.
 */
export function statusText(state: RunLoaded | undefined, now: Date): { text: string; tooltip: string } {
  if (state && !state.run && state.problem) {
    return { text: '$(warning) memlens: run unreadable', tooltip: `${state.problem}\nClick to choose another run.` };
  }
  if (!state || !state.run) {
    return { text: '$(pulse) memlens: no run', tooltip: 'No memlens run yet. Click to choose one.' };
  }
  const run = state.run;
  const tests = run.kind === 'tests';
  const mark = run.checkpoint ? ' (in progress)' : run.complete ? '' : ' (incomplete)';
  const gpu = run.gpu_peak_bytes ? ` · GPU ${formatBytes(run.gpu_peak_bytes)}` : '';
  let text = `${tests ? '$(beaker)' : '$(pulse)'} ${runName(run)} ${formatBytes(run.peak_traced_bytes)} peak${gpu} · ${formatAge(run.started, now)}${mark}`;
  const what = tests ? 'test run' : 'program run';
  let tooltip = `memlens ${what} ${run.id}: ${run.command}`;
  if (run.checkpoint) {
    tooltip += '\nA checkpoint: the program was still running (or was killed before its end); not compared with the baseline.';
  }
  if (state.baseline) {
    if (!run.checkpoint) {
      const delta = run.peak_traced_bytes - state.baseline.peak_traced_bytes;
      const sign = delta > 0 ? '+' : delta < 0 ? '−' : '±';
      text += ` · vs baseline ${sign}${formatBytes(Math.abs(delta))}`;
    }
    tooltip += `\nbaseline of ${tests ? 'test runs' : 'program runs'} ${state.baseline.id}: ${formatBytes(state.baseline.peak_traced_bytes)} peak`;
  }
  if (state.moment) {
    text += ` · at ${state.moment.name}`;
    tooltip +=
      `\nShown: each line's live bytes at ${momentText(state.moment)}` +
      ' ("memlens: Show Whole-Run Figures" to go back)';
  }
  return { text, tooltip: `${tooltip}\nClick to choose a run.` };
}

/** `peak (0.12 s, 30.0 MiB traced)`, `0.25 s (20.0 MiB traced)`: a moment in words. */
export function momentText(moment: MomentInfo): string {
  const traced = `${formatBytes(moment.traced_bytes)} traced`;
  if (moment.kind !== 'time' && moment.t !== null) {
    return `${moment.name} (${moment.t.toFixed(2)} s, ${traced})`;
  }
  return `${moment.name} (${traced})`;
}

/** The key of a folder's state for one kind of run. */
export const stateKey = (workspace: string | undefined, kind: string | undefined): string =>
  `${workspace ?? ''}#${kind ?? 'program'}`;

/**
 * Which state the status bar shows: the one whose run the active editor's figures come from
 * (`shown`: from memlens.documentRun), else the first folder's program run, else its test run.
 */
export function pickState(states: Map<string, RunLoaded>, shown?: { workspace: string; kind: string } | null): RunLoaded | undefined {
  if (shown) {
    const found = states.get(stateKey(shown.workspace, shown.kind));
    if (found) {
      return found;
    }
  }
  const all = [...states.values()];
  return all.find((s) => (s.kind ?? 'program') === 'program' && s.run) ?? all.find((s) => s.run) ?? all[0];
}
