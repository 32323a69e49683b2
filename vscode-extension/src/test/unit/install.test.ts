import * as assert from 'assert';
import * as fs from 'fs';
import * as os from 'os';
import * as path from 'path';
import {
  chooseSource,
  chooseWheel,
  findCheckout,
  install,
  installCommand,
  installHint,
  parseTags,
  probeTags,
  Runner,
  runProcess,
  TAGS_PROBE,
  wheelFits,
} from '../../common/install';

const LINUX = { python: 'cp311', platform: 'linux_x86_64' };

function tmpdir(): string {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'memlens-install-'));
}

function checkout(dir: string, name = 'memlens'): string {
  fs.mkdirSync(path.join(dir, 'native'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'native', 'CMakeLists.txt'), 'project(x)\n');
  fs.writeFileSync(path.join(dir, 'pyproject.toml'), `[project]\nname = "${name}"\n`);
  return dir;
}

describe('install source', () => {
  it('matches wheels to the interpreter by CPython tag and platform', () => {
    assert.ok(wheelFits('memlens-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl', LINUX));
    assert.ok(wheelFits('memlens-0.1.0-cp311-cp311-manylinux_2_17_x86_64.manylinux2014_x86_64.whl', LINUX));
    assert.ok(wheelFits('memlens-0.1.0-cp311-cp311-linux_x86_64.whl', LINUX));
    assert.ok(!wheelFits('memlens-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl', LINUX));
    assert.ok(!wheelFits('memlens-0.1.0-cp311-cp311-manylinux_2_34_aarch64.whl', LINUX));
    assert.ok(!wheelFits('other-0.1.0-cp311-cp311-linux_x86_64.whl', LINUX));
    const mac = { python: 'cp312', platform: 'macosx_14_0_arm64' };
    assert.ok(wheelFits('memlens-0.1.0-cp312-cp312-macosx_11_0_arm64.whl', mac));
    assert.ok(wheelFits('memlens-0.1.0-cp312-cp312-macosx_10_9_universal2.whl', mac));
    assert.ok(!wheelFits('memlens-0.1.0-cp312-cp312-macosx_10_9_x86_64.whl', mac));
    assert.ok(wheelFits('memlens-0.1.0-cp313-cp313-win_amd64.whl', { python: 'cp313', platform: 'win_amd64' }));
  });

  it('reads the tags the interpreter prints, CPython only', () => {
    assert.deepStrictEqual(parseTags('cpython cp311 linux_x86_64\n'), LINUX);
    assert.strictEqual(parseTags('pypy cp310 linux_x86_64'), undefined);
    assert.strictEqual(parseTags(''), undefined);
  });

  it('asks the real interpreter for its tags, isolated (-I)', async () => {
    const calls: string[][] = [];
    const fake: Runner = async (command, args) => {
      calls.push([command, ...args]);
      return { code: 0, output: 'cpython cp311 linux_x86_64\n' };
    };
    assert.deepStrictEqual(await probeTags('/p/python', '/storage', fake), LINUX);
    assert.deepStrictEqual(calls, [['/p/python', '-I', '-c', TAGS_PROBE]]);
    const python = process.env.MEMLENS_TEST_PYTHON ?? 'python3';
    const real = await probeTags(python, os.tmpdir(), runProcess);
    assert.ok(real && /^cp3\d+$/.test(real.python), `tags of ${python}: ${JSON.stringify(real)}`);
  });

  it('prefers a shipped wheel that fits, then a checkout, else nothing', () => {
    const wheels = tmpdir();
    const repo = checkout(tmpdir());
    const notMemlens = checkout(tmpdir(), 'other');
    assert.deepStrictEqual(chooseSource(wheels, LINUX, [notMemlens, repo]), { kind: 'checkout', path: repo });
    fs.writeFileSync(path.join(wheels, 'memlens-0.1.0-cp312-cp312-manylinux_2_34_x86_64.whl'), '');
    assert.deepStrictEqual(chooseSource(wheels, LINUX, [repo]), { kind: 'checkout', path: repo });
    const fits = path.join(wheels, 'memlens-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl');
    fs.writeFileSync(fits, '');
    assert.deepStrictEqual(chooseSource(wheels, LINUX, [repo]), { kind: 'wheel', path: fits });
    // Tags unknown (the probe failed): no wheel is guessed.
    assert.deepStrictEqual(chooseSource(wheels, undefined, [repo]), { kind: 'checkout', path: repo });
    assert.strictEqual(chooseSource(path.join(wheels, 'none'), LINUX, [notMemlens]), undefined);
    assert.strictEqual(chooseWheel(path.join(wheels, 'none'), LINUX), undefined);
    assert.strictEqual(findCheckout([]), undefined);
  });

  it('says the truthful command, quoted where paths have spaces', () => {
    const source = { kind: 'checkout' as const, path: '/src/my memlens' };
    assert.strictEqual(installCommand('/my envs/bin/python', source), '"/my envs/bin/python" -m pip install "/src/my memlens"');
    assert.strictEqual(
      installHint('/p/python', source),
      'memlens is not installed for /p/python. Install it with: /p/python -m pip install "/src/my memlens"',
    );
    const none = installHint('/p/python', undefined);
    assert.ok(none.includes('./dev wheel'));
    assert.ok(none.includes('/p/python -m pip install dist/memlens-*.whl'));
    assert.ok(!/pip install memlens\b/.test(none));
  });

  it('installs with pip of the chosen interpreter, away from the workspace, and logs its output', async () => {
    const calls: { command: string; args: string[]; cwd: string }[] = [];
    const log: string[] = [];
    const ok: Runner = async (command, args, cwd) => {
      calls.push({ command, args, cwd });
      return { code: 0, output: 'Processing ./memlens.whl\nSuccessfully installed memlens-0.1.0\n' };
    };
    const source = { kind: 'wheel' as const, path: '/ext/wheels/memlens-0.1.0-cp311-cp311-linux_x86_64.whl' };
    assert.strictEqual(await install('/p/python', source, '/storage', (l) => log.push(l), ok), true);
    assert.deepStrictEqual(calls, [{ command: '/p/python', args: ['-m', 'pip', 'install', source.path], cwd: '/storage' }]);
    assert.deepStrictEqual(log, [
      `installing memlens: /p/python -m pip install ${source.path}`,
      'Processing ./memlens.whl',
      'Successfully installed memlens-0.1.0',
      'memlens installed',
    ]);
    const failing: Runner = async () => ({ code: 1, output: 'ERROR: not a supported wheel on this platform.\n' });
    const failed: string[] = [];
    assert.strictEqual(await install('/p/python', source, '/storage', (l) => failed.push(l), failing), false);
    assert.strictEqual(failed[failed.length - 1], 'the install failed (exit code 1)');
  });

  it('runs a real process and reports its exit code', async () => {
    const python = process.env.MEMLENS_TEST_PYTHON ?? 'python3';
    assert.deepStrictEqual(await runProcess(python, ['-c', 'print("hi")'], os.tmpdir()), { code: 0, output: 'hi\n' });
    const bad = await runProcess(python, ['-c', 'import sys; sys.exit(3)'], os.tmpdir());
    assert.strictEqual(bad.code, 3);
    const missing = await runProcess('/no/such/python', [], os.tmpdir());
    assert.notStrictEqual(missing.code, 0);
  });
});
