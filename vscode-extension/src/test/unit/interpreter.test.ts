import * as assert from 'assert';
import { expandPath, interpreterFromPythonApi, probeMessage, resolveInterpreter } from '../../common/interpreter';

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
  it('skips the Python extension in an untrusted workspace (its pick may be a workspace venv)', async () => {
    let asked = false;
    const got = await resolveInterpreter({
      setting: () => '',
      pythonExtension: async () => {
        asked = true;
        return '/w/.venv/bin/python';
      },
      isTrusted: () => false,
    });
    assert.deepStrictEqual(got, { path: 'python3', source: 'default' });
    assert.strictEqual(asked, false);
    const user = await resolveInterpreter({ setting: () => '/usr/bin/python3.12', pythonExtension: async () => '/x', isTrusted: () => false });
    assert.deepStrictEqual(user, { path: '/usr/bin/python3.12', source: 'setting' });
  });
  it('reads the Python extension API: active environment, then a bare execution command', () => {
    const res = { fsPath: '/w' };
    const env = { environments: { getActiveEnvironmentPath: (r?: unknown) => ({ path: r === res ? '/w/.venv/bin/python' : '/other' }) } };
    assert.strictEqual(interpreterFromPythonApi(env, res), '/w/.venv/bin/python');
    const exec = { settings: { getExecutionDetails: () => ({ execCommand: ['/opt/py/bin/python3'] }) } };
    assert.strictEqual(interpreterFromPythonApi(exec, res), '/opt/py/bin/python3');
    const conda = { settings: { getExecutionDetails: () => ({ execCommand: ['conda', 'run', '-n', 'x', 'python'] }) } };
    assert.strictEqual(interpreterFromPythonApi(conda, res), undefined);
    const both = { ...exec, environments: { getActiveEnvironmentPath: () => ({ path: '' }) } };
    assert.strictEqual(interpreterFromPythonApi(both, res), '/opt/py/bin/python3');
    assert.strictEqual(interpreterFromPythonApi(undefined, res), undefined);
    assert.strictEqual(interpreterFromPythonApi({}, res), undefined);
  });
  it('explains a failed probe', () => {
    assert.strictEqual(probeMessage('/p/python', 'ok'), undefined);
    assert.strictEqual(
      probeMessage('/p/python', 'missing-memlens', { kind: 'wheel', path: '/ext/wheels/memlens-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl' }),
      'memlens is not installed for /p/python. Install it with: /p/python -m pip install /ext/wheels/memlens-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl',
    );
    // Never `pip install memlens`: it is not on the package index.
    const nowhere = probeMessage('/p/python', 'missing-memlens') ?? '';
    assert.ok(nowhere.startsWith('memlens is not installed for /p/python, and it is not on the package index yet'));
    assert.ok(!nowhere.includes('pip install memlens'));
    assert.strictEqual(
      probeMessage('nopython', 'missing-interpreter'),
      'memlens: cannot start Python "nopython". Set memlens.interpreter or select an interpreter in the Python extension.',
    );
  });
  it('expands ~ and ${workspaceFolder} in the setting', async () => {
    assert.strictEqual(expandPath('~/envs/a/bin/python', '/home/me', '/w'), '/home/me/envs/a/bin/python');
    assert.strictEqual(expandPath('${workspaceFolder}/.venv/bin/python', '/home/me', '/w'), '/w/.venv/bin/python');
    assert.strictEqual(expandPath('${userHome}/py', '/home/me'), '/home/me/py');
    assert.strictEqual(expandPath('~other/py', '/home/me', '/w'), '~other/py');
    assert.strictEqual(expandPath('${workspaceFolder}/py', '/home/me'), '${workspaceFolder}/py');
    const got = await resolveInterpreter({
      setting: () => '${workspaceFolder}/.venv/bin/python',
      workspaceFolder: '/w',
      pythonExtension: async () => '/x',
    });
    assert.deepStrictEqual(got, { path: '/w/.venv/bin/python', source: 'setting' });
  });
});
