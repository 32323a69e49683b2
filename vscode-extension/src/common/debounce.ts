// Collapse bursts of calls (e.g. several settings changing at once) into one.

export interface Timers {
  set(fn: () => void, ms: number): unknown;
  clear(handle: unknown): void;
}

const realTimers: Timers = {
  set: (fn, ms) => setTimeout(fn, ms),
  clear: (handle) => clearTimeout(handle as ReturnType<typeof setTimeout>),
};

export function debounce(fn: () => void, ms: number, timers: Timers = realTimers): () => void {
  let pending: unknown;
  return () => {
    if (pending !== undefined) {
      timers.clear(pending);
    }
    pending = timers.set(() => {
      pending = undefined;
      fn();
    }, ms);
  };
}
