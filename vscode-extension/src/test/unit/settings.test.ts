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
        compareWithBaseline: true,
        'leakWarning.minBytes': 10,
        'trace.server': 'verbose',
      }),
    );
    assert.deepStrictEqual(s, {
      inlayHints: { enabled: true, figure: 'incl_alloc', minBytes: 4096, minShare: 0.02 },
      compareWithBaseline: true,
      leakWarning: { minBytes: 10 },
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
});
