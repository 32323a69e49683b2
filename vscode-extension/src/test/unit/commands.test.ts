import * as assert from 'assert';
import * as sinon from 'sinon';
import { pickRun, runSpec, showSummary, splitArgs, summaryPickItems, summaryText } from '../../common/commands';
import { debounce } from '../../common/debounce';
import { baselinePickItems, runPickItems } from '../../common/runs';
import { VsCodeApi } from '../../common/vscodeapi';

type Fake = VsCodeApi & { [K in keyof VsCodeApi]: sinon.SinonStub };

function fakeApi(overrides: Partial<VsCodeApi> = {}): Fake {
  const api = {
    getSetting: sinon.stub().callsFake((_k: string, fallback: unknown) => fallback),
    updateSetting: sinon.stub().resolves(),
    isTrusted: sinon.stub().returns(true),
    showError: sinon.stub().resolves(undefined),
    showInfo: sinon.stub().resolves(undefined),
    showQuickPick: sinon.stub().resolves(undefined),
    showInputBox: sinon.stub().resolves(undefined),
    activePythonFile: sinon.stub().returns(undefined),
    copyToClipboard: sinon.stub().resolves(),
    activeWorkspaceFolder: sinon.stub().returns(undefined),
    openLocation: sinon.stub().resolves(),
    ...overrides,
  };
  return api as unknown as Fake;
}

const runs = [
  { id: '2026a', path: '/r/a.mlrun', started: '2026-11-22T10:00:00Z', command: 'python x.py', peak_traced_bytes: 1024, duration_s: 1, complete: true, isBaseline: true, isLoaded: false, error: null },
  { id: '2026b', path: '/r/b.mlrun', started: '2026-11-22T11:00:00Z', command: "python x.py -v 'a b'", peak_traced_bytes: 2048, duration_s: 2, complete: false, isBaseline: false, isLoaded: true, error: null },
  { id: '2025c', path: '/r/c.mlrun', started: null, command: null, peak_traced_bytes: null, duration_s: null, complete: null, isBaseline: false, isLoaded: false, error: 'cannot read /r/c.mlrun: truncated' },
];
const NOW = new Date('2026-11-22T11:30:00Z');

describe('commands', () => {
  it('never runs code in an untrusted workspace', () => {
    const api = fakeApi({ isTrusted: sinon.stub().returns(false) });
    assert.strictEqual(runSpec(api, '/py', '/w/x.py', '/w', []), undefined);
    assert.match(String(api.showError.firstCall.args[0]), /untrusted workspace/);
  });
  it('runs the file in its workspace folder with its arguments', () => {
    const api = fakeApi();
    assert.deepStrictEqual(runSpec(api, '/venv/bin/python', '/w/x.py', '/w', ['-n', '3']), {
      command: '/venv/bin/python',
      args: ['-m', 'memlens', 'run', '/w/x.py', '-n', '3'],
      cwd: '/w',
    });
    assert.strictEqual(api.showError.called, false);
  });
  it('asks for a file when none is open, and refuses files outside the workspace', () => {
    const api = fakeApi();
    assert.strictEqual(runSpec(api, '/py', undefined, '/w', []), undefined);
    assert.strictEqual(runSpec(api, '/py', '/etc/x.py', undefined, []), undefined);
    assert.match(String(api.showError.secondCall.args[0]), /outside every workspace folder/);
  });
  it('builds quick-pick items newest first with marks; unreadable runs say why', () => {
    const items = runPickItems(runs, NOW);
    assert.deepStrictEqual(
      items.map((i) => [i.label, i.description, i.detail, i.run]),
      [
        ['$(eye) 2026b', '2.0 KiB peak · 2.00 s · 30m ago · shown, incomplete', "python x.py -v 'a b'", '/r/b.mlrun'],
        ['$(pin) 2026a', '1.0 KiB peak · 1.00 s · 2h ago · baseline', 'python x.py', '/r/a.mlrun'],
        ['2025c', 'unreadable', 'cannot read /r/c.mlrun: truncated', '/r/c.mlrun'],
      ],
    );
  });
  it('offers "No baseline" first when a baseline is set', () => {
    const items = baselinePickItems(runs, NOW);
    assert.deepStrictEqual(
      items.map((i) => [i.label, i.run, i.clear ?? false]),
      [
        ['$(close) No baseline for program runs', '', true],
        ['$(eye) 2026b', '/r/b.mlrun', false],
        ['$(pin) 2026a', '/r/a.mlrun', false],
        ['2025c', '/r/c.mlrun', false],
      ],
    );
    const none = baselinePickItems(runs.map((r) => ({ ...r, isBaseline: false })), NOW);
    assert.deepStrictEqual(none.map((i) => i.run), ['/r/b.mlrun', '/r/a.mlrun', '/r/c.mlrun']);
    // Each kind of run has its own baseline, cleared on its own; test runs are marked.
    const both = baselinePickItems([...runs, { ...runs[0], id: '2026t', path: '/r/t.mlrun', kind: 'tests' }], NOW);
    assert.deepStrictEqual(
      both.slice(0, 3).map((i) => [i.label, i.kind, i.description]),
      [
        ['$(close) No baseline for program runs', 'program', 'clear the baseline of program runs'],
        ['$(close) No baseline for test runs', 'tests', 'clear the baseline of test runs'],
        ['$(pin) 2026t', undefined, '1.0 KiB peak · 1.00 s · 2h ago · test run, baseline'],
      ],
    );
  });
  it('sets the picked run as baseline in the given workspace', async () => {
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake(async (items: { run: string }[]) => items[2]) });
    const execute = sinon.stub();
    execute.withArgs('memlens.listRuns').resolves(runs);
    execute.withArgs('memlens.setBaseline').resolves(null);
    assert.strictEqual(await pickRun(api, { execute }, 'baseline', 'file:///w'), '/r/a.mlrun');
    assert.deepStrictEqual(execute.firstCall.args, ['memlens.listRuns', [{ workspace: 'file:///w' }]]);
    assert.deepStrictEqual(execute.secondCall.args, ['memlens.setBaseline', [{ run: '/r/a.mlrun', workspace: 'file:///w' }]]);
    assert.strictEqual(api.showQuickPick.firstCall.args[1], 'Choose the baseline run');
  });
  it('clears the baseline when "No baseline" is picked', async () => {
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake(async (items: { run: string }[]) => items[0]) });
    const execute = sinon.stub();
    execute.withArgs('memlens.listRuns').resolves(runs);
    assert.strictEqual(await pickRun(api, { execute }, 'baseline'), '');
    assert.deepStrictEqual(execute.secondCall.args, ['memlens.clearBaseline', [{ kind: 'program' }]]);
  });
  it('shows the picked run', async () => {
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake(async (items: { run: string }[]) => items[0]) });
    const execute = sinon.stub();
    execute.withArgs('memlens.listRuns').resolves(runs);
    assert.strictEqual(await pickRun(api, { execute }, 'show'), '/r/b.mlrun');
    assert.deepStrictEqual(execute.secondCall.args, ['memlens.chooseRun', [{ run: '/r/b.mlrun' }]]);
  });
  it('does nothing when the pick is dismissed', async () => {
    const api = fakeApi();
    const execute = sinon.stub().resolves(runs);
    assert.strictEqual(await pickRun(api, { execute }, 'show'), undefined);
    assert.strictEqual(execute.callCount, 1);
  });
  it('says when there are no runs', async () => {
    const api = fakeApi();
    assert.strictEqual(await pickRun(api, { execute: sinon.stub().resolves([]) }, 'show'), undefined);
    assert.match(String(api.showInfo.firstCall.args[0]), /no runs yet/);
  });
  it('splits argument lines like a shell', () => {
    assert.deepStrictEqual(splitArgs(`-n 3 "two words" 'x y' a\\ b ""`), ['-n', '3', 'two words', 'x y', 'a b', '']);
    assert.deepStrictEqual(splitArgs('   '), []);
  });
  it('summarises the loaded run', () => {
    const text = summaryText({
      run: { id: 'r1', peak_traced_bytes: 3 * 1024 * 1024 },
      baseline: { id: 'b1', peak_traced_bytes: 2048 },
      top: [{ file: '/w/app.py', line: 12, label: '48.2 MiB peak' }],
    });
    assert.strictEqual(text, 'memlens run r1: 3.0 MiB peak, +3.0 MiB vs baseline');
    const progress = { id: 'r2', peak_traced_bytes: 1024, checkpoint: true, kind: 'tests' };
    assert.strictEqual(
      summaryText({ run: progress, baseline: { id: 'b1', peak_traced_bytes: 2048 }, top: [] }),
      'memlens test run r2: 1.0 KiB peak (in progress: not compared)',
    );
    assert.strictEqual(summaryText({ run: null, baseline: null, top: [] }), 'memlens: no run loaded.');
  });
  it('shows the summary as a pick of the heaviest lines and opens the picked one', async () => {
    const summary = {
      run: { id: 'r1', peak_traced_bytes: 1024 },
      baseline: null,
      top: [
        { file: '/w/app.py', line: 12, label: '48.2 MiB peak' },
        { file: '/w/lib/io.py', line: 3, label: '1.0 KiB peak' },
      ],
    };
    assert.deepStrictEqual(summaryPickItems({ ...summary, top: [{ ...summary.top[0], text: 'x = load()' }] })[0], {
      label: 'app.py:12',
      description: '48.2 MiB peak',
      detail: 'x = load()',
      file: '/w/app.py',
      line: 12,
    });
    assert.deepStrictEqual(summaryPickItems(summary), [
      { label: 'app.py:12', description: '48.2 MiB peak', file: '/w/app.py', line: 12 },
      { label: 'io.py:3', description: '1.0 KiB peak', file: '/w/lib/io.py', line: 3 },
    ]);
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake(async (items: unknown[]) => items[1]) });
    const execute = sinon.stub().resolves(summary);
    assert.strictEqual(await showSummary(api, { execute }, 'file:///w'), 'memlens run r1: 1.0 KiB peak');
    assert.deepStrictEqual(execute.firstCall.args, ['memlens.summary', [{ workspace: 'file:///w' }]]);
    assert.strictEqual(api.showQuickPick.firstCall.args[1], 'memlens run r1: 1.0 KiB peak');
    assert.deepStrictEqual(api.openLocation.firstCall.args, ['/w/lib/io.py', 3]);
  });
  it('lists changes against the baseline and gone lines', () => {
    const summary = {
      run: { id: 'r1', peak_traced_bytes: 2048 },
      baseline: { id: 'b1', peak_traced_bytes: 4096 },
      delta: -2048,
      top: [
        { file: '/w/app.py', line: 12, label: '48.2 MiB at peak', delta: 1024 },
        { file: '/w/app.py', line: 14, label: '2.0 MiB at peak', delta: null },
      ],
      gone: [{ file: '/w/app.py', baselineLine: 20, text: 'cache = load()', label: '3.0 MiB at peak' }],
    };
    assert.strictEqual(summaryText(summary), 'memlens run r1: 2.0 KiB peak, −2.0 KiB vs baseline');
    assert.deepStrictEqual(
      summaryPickItems(summary).map((i) => [i.label, i.description]),
      [
        ['app.py:12', '48.2 MiB at peak · +1.0 KiB vs baseline'],
        ['app.py:14', '2.0 MiB at peak · new since baseline'],
        ['$(trash) app.py, baseline line 20', 'gone since baseline: held 3.0 MiB at peak'],
      ],
    );
  });
  it('says when no run is loaded instead of an empty summary', async () => {
    const api = fakeApi();
    await showSummary(api, { execute: sinon.stub().resolves({ run: null, baseline: null, top: [] }) });
    assert.strictEqual(api.showInfo.firstCall.args[0], 'memlens: no run loaded.');
    assert.strictEqual(api.showQuickPick.called, false);
  });
  it('debounces restarts', () => {
    const clock = sinon.useFakeTimers();
    try {
      const fn = sinon.stub();
      const restart = debounce(fn, 500);
      restart();
      restart();
      clock.tick(400);
      restart();
      clock.tick(499);
      assert.strictEqual(fn.callCount, 0);
      clock.tick(1);
      assert.strictEqual(fn.callCount, 1);
    } finally {
      clock.restore();
    }
  });
});
