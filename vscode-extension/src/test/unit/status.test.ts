import * as assert from 'assert';
import { formatAge, formatBytes, pickState, RunLoaded, runName, splitLoaded, stateKey, statusText } from '../../common/status';

const run = {
  id: '20261122-100000-1',
  path: '/w/.memlens/runs/20261122-100000-1.mlrun',
  started: '2026-11-22T10:00:00+00:00',
  command: 'python app.py',
  peak_traced_bytes: 48 * 1024 * 1024,
  duration_s: 1.5,
  complete: true,
};

describe('status bar', () => {
  it('formats sizes like the server', () => {
    assert.strictEqual(formatBytes(512), '512 B');
    assert.strictEqual(formatBytes(1536), '1.5 KiB');
    assert.strictEqual(formatBytes(48 * 1024 * 1024), '48.0 MiB');
  });
  it('formats ages', () => {
    const now = new Date('2026-11-22T10:05:00Z');
    assert.strictEqual(formatAge('2026-11-22T10:04:30+00:00', now), '30s ago');
    assert.strictEqual(formatAge('2026-11-22T10:00:00+00:00', now), '5m ago');
    assert.strictEqual(formatAge('2026-11-20T10:05:00+00:00', now), '2d ago');
    assert.strictEqual(formatAge('garbage', now), '');
  });
  it('shows the run, its age and the change against the baseline', () => {
    const now = new Date('2026-11-22T10:05:00Z');
    const baseline = { ...run, id: 'b', peak_traced_bytes: 60 * 1024 * 1024 };
    const { text, tooltip } = statusText({ run, baseline }, now);
    assert.strictEqual(text, '$(pulse) app.py 48.0 MiB peak · 5m ago · vs baseline −12.0 MiB');
    assert.strictEqual(
      tooltip,
      'memlens program run 20261122-100000-1: python app.py\nbaseline of program runs b: 60.0 MiB peak\nClick to choose a run.',
    );
  });
  it('says which moment the editor shows', () => {
    const now = new Date('2026-11-22T10:05:00Z');
    const moment = { kind: 'time' as const, name: '0.25 s', spec: '0.250000s', t: 0.25, traced_bytes: 1024 * 1024 };
    const { text, tooltip } = statusText({ run, baseline: null, moment }, now);
    assert.strictEqual(text, '$(pulse) app.py 48.0 MiB peak · 5m ago · at 0.25 s');
    assert.ok(tooltip.includes("Shown: each line's live bytes at 0.25 s (1.0 MiB traced)"));
    assert.strictEqual(statusText({ run, baseline: null, moment: null }, now).text, '$(pulse) app.py 48.0 MiB peak · 5m ago');
  });
  it('names the problem when the run cannot be read', () => {
    const { text, tooltip } = statusText(
      { run: null, baseline: null, problem: 'cannot read /w/.memlens/runs/x.mlrun: truncated file' },
      new Date(),
    );
    assert.strictEqual(text, '$(warning) memlens: run unreadable');
    assert.strictEqual(tooltip, 'cannot read /w/.memlens/runs/x.mlrun: truncated file\nClick to choose another run.');
  });
  it('shows the GPU peak of a run that recorded GPU memory', () => {
    const gpuRun = { ...run, gpu_peak_bytes: 320966660 };
    const { text } = statusText({ run: gpuRun, baseline: null }, new Date('2026-11-22T10:05:00Z'));
    assert.strictEqual(text, '$(pulse) app.py 48.0 MiB peak · GPU 306.1 MiB · 5m ago');
    const none = statusText({ run: { ...run, gpu_peak_bytes: 0 }, baseline: null }, new Date('2026-11-22T10:05:00Z'));
    assert.strictEqual(none.text, '$(pulse) app.py 48.0 MiB peak · 5m ago');
  });
  it('says when there is no run, and marks incomplete runs', () => {
    assert.strictEqual(statusText(undefined, new Date()).text, '$(pulse) memlens: no run');
    const { text } = statusText({ run: { ...run, complete: false }, baseline: null }, new Date('2026-11-22T10:00:10Z'));
    assert.strictEqual(text, '$(pulse) app.py 48.0 MiB peak · 10s ago (incomplete)');
  });
  it('shows a checkpoint as in progress and never compares it', () => {
    const checkpoint = { ...run, complete: false, checkpoint: true };
    const baseline = { ...run, id: 'b', peak_traced_bytes: 60 * 1024 * 1024 };
    const { text, tooltip } = statusText({ run: checkpoint, baseline }, new Date('2026-11-22T10:00:10Z'));
    assert.strictEqual(text, '$(pulse) app.py 48.0 MiB peak · 10s ago (in progress)');
    assert.match(tooltip, /A checkpoint: .* not compared with the baseline/);
  });
  it('names the run: the script, the module, or pytest for a test run', () => {
    assert.strictEqual(runName({ ...run, command: "python '/w/my app.py' -v" }), 'my app.py');
    assert.strictEqual(runName({ ...run, command: 'python -m pkg.tool --x' }), '-m pkg.tool');
    assert.strictEqual(runName({ ...run, command: 'pytest -q tests', kind: 'tests' }), 'pytest');
    const tests = { ...run, id: 't', command: 'pytest -q', kind: 'tests', peak_traced_bytes: 20 * 1024 * 1024 };
    const { text, tooltip } = statusText({ kind: 'tests', run: tests, baseline: null }, new Date('2026-11-22T10:01:00Z'));
    assert.strictEqual(text, '$(beaker) pytest 20.0 MiB peak · 1m ago');
    assert.match(tooltip, /^memlens test run t: pytest -q/);
  });
  it('shows the run of the kind the active file shows, else the program run', () => {
    const states = new Map<string, RunLoaded>();
    const program: RunLoaded = { workspace: 'file:///w', kind: 'program', run, baseline: null };
    const tests: RunLoaded = { workspace: 'file:///w', kind: 'tests', run: { ...run, id: 't', kind: 'tests' }, baseline: null };
    states.set(stateKey('file:///w', 'tests'), tests);
    states.set(stateKey('file:///w', 'program'), program);
    assert.strictEqual(pickState(states, null), program);
    assert.strictEqual(pickState(states, { workspace: 'file:///w', kind: 'tests' }), tests);
    assert.strictEqual(pickState(states, { workspace: 'file:///other', kind: 'tests' }), program);
    assert.strictEqual(pickState(new Map(), null), undefined);
  });
  it('reads the program runs and the test runs of one runLoaded', () => {
    const tests = { run: { ...run, kind: 'tests' }, baseline: null, problem: null };
    assert.deepStrictEqual(splitLoaded({ workspace: 'file:///w', run, baseline: null, problem: null, tests }), [
      { workspace: 'file:///w', kind: 'program', run, baseline: null, problem: null },
      { ...tests, workspace: 'file:///w', kind: 'tests' },
    ]);
    assert.deepStrictEqual(splitLoaded({ workspace: 'file:///w', run, baseline: null }), [
      { workspace: 'file:///w', kind: 'program', run, baseline: null },
    ]);
  });
});
