import * as assert from 'assert';
import { needsRestart, readSettings } from '../../common/settings';

function getter(values: Record<string, unknown>) {
  return <T>(key: string, fallback: T): T => (key in values ? (values[key] as T) : fallback);
}

describe('readSettings', () => {
  it('maps settings to the server initialization options', () => {
    const s = readSettings(
      getter({
        'inlayHints.figure': 'incl_alloc',
        'inlayHints.minBytes': 4096,
        'inlayHints.minShare': 0.02,
        'inlayHints.style': 'compact',
        'codeLens.minBytes': 0,
        compareWithBaseline: true,
        'compare.minBytes': 0,
        'leakWarning.minBytes': 10,
        'trace.server': 'verbose',
      }),
    );
    assert.deepStrictEqual(s, {
      inlayHints: {
        enabled: true,
        figure: 'incl_alloc',
        minBytes: 4096,
        minShare: 0.02,
        calls: true,
        callMinBytes: 1048576,
        style: 'compact',
        importMinBytes: 1048576,
      },
      compareWithBaseline: true,
      compare: { minBytes: 0, minRatio: 0.01, minShare: 0.0001 },
      leakWarning: { minBytes: 10 },
      codeLens: { minBytes: 0 },
      trace: { server: 'verbose' },
    });
  });
  it('replaces unknown values with defaults', () => {
    const s = readSettings(getter({ 'inlayHints.figure': 'bogus', 'trace.server': 'loud' }));
    assert.strictEqual(s.inlayHints.figure, 'peak');
    assert.strictEqual(s.trace.server, 'off');
  });
  it('restarts only for the interpreter', () => {
    assert.strictEqual(needsRestart((k) => k === 'memlens.interpreter'), true);
    assert.strictEqual(needsRestart((k) => k === 'memlens.inlayHints.figure'), false);
  });
  it('retries a server that is not running on any memlens setting change', () => {
    const figure = (k: string) => k === 'memlens' || k === 'memlens.inlayHints.figure';
    assert.strictEqual(needsRestart(figure, false), true);
    assert.strictEqual(needsRestart((k) => k === 'editor.fontSize', false), false);
  });
});
