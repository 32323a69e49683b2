// Settings of the `memlens` section: what the server receives, and which keys restart it.

export const FIGURES = [
  'peak',
  'alloc',
  'live',
  'gpu_peak',
  'gpu_alloc',
  'gpu_live',
  'incl_peak',
  'incl_alloc',
  'incl_live',
  'incl_gpu_peak',
  'incl_gpu_alloc',
  'incl_gpu_live',
] as const;
export type Figure = (typeof FIGURES)[number];

export interface ServerSettings {
  inlayHints: {
    enabled: boolean;
    figure: Figure;
    minBytes: number;
    minShare: number;
    calls: boolean;
    callMinBytes: number;
    style: 'full' | 'compact';
    importMinBytes: number;
  };
  compareWithBaseline: boolean;
  compare: { minBytes: number; minRatio: number; minShare: number };
  leakWarning: { minBytes: number };
  codeLens: { minBytes: number };
  trace: { server: 'off' | 'messages' | 'verbose' };
}

type Getter = <T>(key: string, fallback: T) => T;

export function readSettings(get: Getter): ServerSettings {
  const figure = get<string>('inlayHints.figure', 'peak');
  const trace = get<string>('trace.server', 'off');
  return {
    inlayHints: {
      enabled: get<boolean>('inlayHints.enabled', true),
      figure: (FIGURES as readonly string[]).includes(figure) ? (figure as Figure) : 'peak',
      minBytes: get<number>('inlayHints.minBytes', 1024),
      minShare: get<number>('inlayHints.minShare', 0),
      calls: get<boolean>('inlayHints.calls', true),
      callMinBytes: get<number>('inlayHints.callMinBytes', 1048576),
      style: get<string>('inlayHints.style', 'full') === 'compact' ? 'compact' : 'full',
      importMinBytes: get<number>('inlayHints.importMinBytes', 1048576),
    },
    compareWithBaseline: get<boolean>('compareWithBaseline', false),
    compare: {
      minBytes: get<number>('compare.minBytes', 4096),
      minRatio: get<number>('compare.minRatio', 0.01),
      minShare: get<number>('compare.minShare', 0.0001),
    },
    leakWarning: { minBytes: get<number>('leakWarning.minBytes', 1048576) },
    codeLens: { minBytes: get<number>('codeLens.minBytes', 1048576) },
    trace: { server: trace === 'messages' || trace === 'verbose' ? trace : 'off' },
  };
}

/**
 * Keys whose change needs a new server process. The others reach a running server as
 * workspace/didChangeConfiguration (it re-reads the `memlens` section), so hints update
 * without a restart; `memlens.trace.server` is applied by vscode-languageclient itself.
 */
export const RESTART_KEYS = ['memlens.interpreter'];

/** Whether a configuration change should (re)start the server: the interpreter changed, or
 * any memlens setting changed while no server is running (e.g. it failed to start). */
export function needsRestart(affects: (section: string) => boolean, serverRunning = true): boolean {
  if (RESTART_KEYS.some((key) => affects(key))) {
    return true;
  }
  return !serverRunning && affects('memlens');
}
