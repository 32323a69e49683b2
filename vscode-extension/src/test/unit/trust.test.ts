import * as assert from 'assert';
import { filterLenses, mayExecuteServerCommand, mayRunCode } from '../../common/trust';

describe('workspace trust', () => {
  it('runs code only in a trusted workspace', () => {
    assert.strictEqual(mayRunCode(true), true);
    assert.strictEqual(mayRunCode(false), false);
  });
  it('refuses the server command that runs a program, but not the ones that show runs', () => {
    assert.strictEqual(mayExecuteServerCommand('memlens.runFile', false), false);
    assert.strictEqual(mayExecuteServerCommand('memlens.runFile', true), true);
    for (const cmd of ['memlens.setBaseline', 'memlens.clearBaseline', 'memlens.chooseRun', 'memlens.listRuns', 'memlens.summary']) {
      assert.strictEqual(mayExecuteServerCommand(cmd, false), true, cmd);
    }
  });
  it('hides "Run under memlens" lenses but keeps figure lenses when untrusted', () => {
    const lenses = [
      { line: 1, command: { command: 'memlens.runFile' } },
      { line: 2, command: { command: '' } },
      { line: 3 },
    ];
    assert.deepStrictEqual(filterLenses(lenses, false).map((l) => l.line), [2, 3]);
    assert.deepStrictEqual(filterLenses(lenses, true).map((l) => l.line), [1, 2, 3]);
  });
});
