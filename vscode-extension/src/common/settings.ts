// Settings of the `memlens` section: what the server receives, and which keys restart it.

export const FIGURES = ['peak', 'alloc', 'live', 'incl_peak', 'incl_alloc', 'incl_live'] as const;
export type Figure = (typeof FIGURES)[number];

export interface ServerSettings {
  inlayHints: { enabled: boolean; figure: Figure; minBytes: number; minShare: number };
  compareWithBaseline: boolean;
  leakWarning: { minBytes: number };
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
    },
    compareWithBaseline: get<boolean>('compareWithBaseline', false),
    leakWarning: { minBytes: get<number>('leakWarning.minBytes', 1048576) },
    trace: { server: trace === 'messages' || trace === 'verbose' ? trace : 'off' },
  };
}

/** Keys whose change needs a new server process (the rest are sent as configuration). */
export const RESTART_KEYS = ['memlens.interpreter'];

export function needsRestart(affects: (section: string) => boolean): boolean {
  return RESTART_KEYS.some((key) => affects(key));
}
