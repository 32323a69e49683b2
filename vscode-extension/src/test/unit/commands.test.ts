import * as assert from 'assert';
import * as sinon from 'sinon';
import { pickRun, runFile, ServerLink, splitArgs, summaryText, toggleSetting } from '../../common/commands';
import { debounce } from '../../common/debounce';
import { runPickItems } from '../../common/runs';
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
    ...overrides,
  };
  return api as unknown as Fake;
}

const runs = [
  { id: 'a', path: '/r/a.mlrun', started: '2026-11-22T10:00:00Z', command: 'python x.py', peak_traced_bytes: 1024, duration_s: 1, complete: true, isBaseline: true, isLoaded: false },
  { id: 'b', path: '/r/b.mlrun', started: '2026-11-22T11:00:00Z', command: "python x.py -v", peak_traced_bytes: 2048, duration_s: 2, complete: false, isBaseline: false, isLoaded: true },
];

describe('commands', () => {
  it('never runs code in an untrusted workspace', async () => {
    const api = fakeApi({ isTrusted: sinon.stub().returns(false) });
    const link: ServerLink = { execute: sinon.stub().resolves({ exitCode: 0, run: '/r' }) };
    assert.strictEqual(await runFile(api, link, 'file:///x.py', []), undefined);
    assert.strictEqual((link.execute as sinon.SinonStub).called, false);
    assert.match(String(api.showError.firstCall.args[0]), /untrusted workspace/);
  });
  it('runs the file through the server with its arguments', async () => {
    const api = fakeApi();
    const execute = sinon.stub().resolves({ exitCode: 3, run: '/r/c.mlrun' });
    const got = await runFile(api, { execute }, 'file:///x.py', ['-n', '3']);
    assert.deepStrictEqual(execute.firstCall.args, ['memlens.runFile', [{ uri: 'file:///x.py', args: ['-n', '3'] }]]);
    assert.deepStrictEqual(got, { exitCode: 3, run: '/r/c.mlrun' });
    assert.match(String(api.showInfo.firstCall.args[0]), /exited with code 3/);
  });
  it('asks for a file when none is open', async () => {
    const api = fakeApi();
    const execute = sinon.stub();
    await runFile(api, { execute }, undefined, []);
    assert.strictEqual(execute.called, false);
    assert.ok(api.showError.calledOnce);
  });
  it('builds quick-pick items newest first with marks', () => {
    const items = runPickItems(runs);
    assert.deepStrictEqual(
      items.map((i) => [i.label, i.description, i.detail, i.run]),
      [
        ['$(eye) b', '2.0 KiB peak · 2.00 s · shown, incomplete', 'python x.py -v', '/r/b.mlrun'],
        ['$(pin) a', '1.0 KiB peak · 1.00 s · baseline', 'python x.py', '/r/a.mlrun'],
      ],
    );
  });
  it('sets the picked run as baseline', async () => {
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake(async (items: { run: string }[]) => items[1]) });
    const execute = sinon.stub();
    execute.withArgs('memlens.listRuns').resolves(runs);
    execute.withArgs('memlens.setBaseline').resolves(null);
    assert.strictEqual(await pickRun(api, { execute }, 'baseline'), '/r/a.mlrun');
    assert.deepStrictEqual(execute.secondCall.args, ['memlens.setBaseline', [{ run: '/r/a.mlrun' }]]);
  });
  it('lists unreadable runs without figures', () => {
    const items = runPickItems([
      { id: 'c', path: '/r/c.mlrun', started: null, command: null, peak_traced_bytes: null, duration_s: null, complete: null, isBaseline: false, isLoaded: false, error: 'corrupt file' },
    ]);
    assert.deepStrictEqual(items, [{ label: 'c', description: 'unreadable', detail: 'corrupt file', run: '/r/c.mlrun' }]);
  });
  it('says when there are no runs', async () => {
    const api = fakeApi();
    assert.strictEqual(await pickRun(api, { execute: sinon.stub().resolves([]) }, 'show'), undefined);
    assert.match(String(api.showInfo.firstCall.args[0]), /no runs yet/);
  });
  it('toggles settings', async () => {
    const api = fakeApi({ getSetting: sinon.stub().returns(true) });
    assert.strictEqual(await toggleSetting(api, 'inlayHints.enabled', true), false);
    assert.deepStrictEqual(api.updateSetting.firstCall.args, ['inlayHints.enabled', false]);
  });
  it('splits argument lines like a shell', () => {
    assert.deepStrictEqual(splitArgs(`-n 3 "two words" 'x y' a\\ b ""`), ['-n', '3', 'two words', 'x y', 'a b', '']);
    assert.deepStrictEqual(splitArgs('   '), []);
  });
  it('summarises the loaded run', () => {
    const text = summaryText({
      run: { id: 'r1', peak_traced_bytes: 1 },
      baseline: { id: 'b1' },
      top: [{ file: '/w/app.py', line: 12, label: '▲ 48.2 MiB peak' }],
    });
    assert.strictEqual(text, 'memlens run r1 (baseline b1)\napp.py:12  ▲ 48.2 MiB peak');
    assert.strictEqual(summaryText({ run: null, baseline: null, top: [] }), 'memlens: no run loaded.');
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
