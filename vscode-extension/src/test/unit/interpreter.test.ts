import * as assert from 'assert';
import { installHint, resolveInterpreter } from '../../common/interpreter';

describe('resolveInterpreter', () => {
  it('prefers the memlens.interpreter setting', async () => {
    const got = await resolveInterpreter({ setting: () => '/opt/py/bin/python', pythonExtension: async () => '/ext/python' });
    assert.deepStrictEqual(got, { path: '/opt/py/bin/python', source: 'setting' });
  });
  it('uses the Python extension next', async () => {
    const got = await resolveInterpreter({ setting: () => '  ', pythonExtension: async () => '/ext/python' });
    assert.deepStrictEqual(got, { path: '/ext/python', source: 'python-extension' });
  });
  it('falls back to python3 when the extension is missing or fails', async () => {
    assert.deepStrictEqual(await resolveInterpreter({ setting: () => '', pythonExtension: async () => undefined }), {
      path: 'python3',
      source: 'default',
    });
    const failing = await resolveInterpreter({
      setting: () => '',
      pythonExtension: async () => {
        throw new Error('not ready');
      },
    });
    assert.strictEqual(failing.path, 'python3');
  });
  it('gives an install command, quoted when the path has spaces', () => {
    assert.strictEqual(
      installHint('/my envs/bin/python'),
      'memlens is not installed for /my envs/bin/python. Install it with: "/my envs/bin/python" -m pip install memlens',
    );
  });
});
