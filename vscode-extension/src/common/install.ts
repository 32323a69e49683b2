// Installing memlens into the chosen interpreter. memlens is not on the package index yet, so
// `pip install memlens` would fail: the extension installs from a wheel shipped inside it
// (`./dev vsix` puts the wheels of `./dev wheel` in wheels/), else from a memlens checkout (the
// one the extension runs from, or a trusted workspace folder), else it says how to get one.
// Plain Node only (child_process, fs, path), so the unit tests run it as is.
import { execFile } from 'child_process';
import * as fs from 'fs';
import * as path from 'path';

/** Where memlens can be installed from: a wheel file or a checkout (a folder with pyproject.toml). */
export interface InstallSource {
  kind: 'wheel' | 'checkout';
  path: string;
}

/** An interpreter's wheel tags, as TAGS_PROBE prints them: `cp311 linux_x86_64`. */
export interface PythonTags {
  python: string;
  platform: string;
}

/** Run with `python -I -c`: the interpreter's CPython tag and platform, wheel-style. */
export const TAGS_PROBE =
  "import sys, sysconfig; print(sys.implementation.name, 'cp%d%d' % sys.version_info[:2], sysconfig.get_platform().replace('-', '_').replace('.', '_'))";

export function parseTags(output: string): PythonTags | undefined {
  const [implementation, python, platform] = output.trim().split(/\s+/);
  return implementation === 'cpython' && python && platform ? { python, platform } : undefined;
}

/** Whether a wheel file name (`memlens-0.1.0-cp311-cp311-manylinux_2_34_x86_64.whl`) is for these tags. */
export function wheelFits(fileName: string, tags: PythonTags): boolean {
  const parts = path.basename(fileName).replace(/\.whl$/, '').split('-');
  if (parts.length < 5 || parts[0] !== 'memlens') {
    return false;
  }
  const [pythonTags, platformTags] = [parts[parts.length - 3], parts[parts.length - 1]];
  if (!pythonTags.split('.').includes(tags.python)) {
    return false;
  }
  return platformTags.split('.').some((p) => platformFits(p, tags.platform));
}

// The minimum C library or macOS versions in a tag are left to pip, which refuses a wheel
// this system is too old for, with its own message.
function platformFits(wheel: string, mine: string): boolean {
  if (wheel === mine) {
    return true;
  }
  const linux = /^linux_(.+)$/.exec(mine);
  if (linux) {
    const m = /^(?:manylinux|musllinux)(?:_\d+_\d+|1|2010|2014)_(.+)$/.exec(wheel);
    return m !== null && m[1] === linux[1];
  }
  const mac = /^macosx_\d+_\d+_(.+)$/.exec(mine);
  if (mac) {
    const m = /^macosx_\d+_\d+_(.+)$/.exec(wheel);
    return m !== null && (m[1] === mac[1] || m[1] === 'universal2');
  }
  return false;
}

/** The bundled wheel for these tags, if one is in `dir`. */
export function chooseWheel(dir: string, tags: PythonTags | undefined): string | undefined {
  if (!tags) {
    return undefined;
  }
  let names: string[];
  try {
    names = fs.readdirSync(dir);
  } catch {
    return undefined; // no wheels shipped (a development build of the extension)
  }
  const fits = names.filter((n) => n.endsWith('.whl') && wheelFits(n, tags)).sort();
  return fits.length ? path.join(dir, fits[fits.length - 1]) : undefined;
}

/** The first of `dirs` that is a memlens checkout: pyproject.toml naming memlens, and native/. */
export function findCheckout(dirs: string[]): string | undefined {
  return dirs.find((dir) => {
    try {
      const project = fs.readFileSync(path.join(dir, 'pyproject.toml'), 'utf8');
      return /^name\s*=\s*"memlens"\s*$/m.test(project) && fs.existsSync(path.join(dir, 'native', 'CMakeLists.txt'));
    } catch {
      return false;
    }
  });
}

/**
 * Where to install memlens from: a shipped wheel that fits the interpreter, else a checkout.
 * `checkouts` are the folders to look in, the extension's own parent first; workspace folders
 * only when the workspace is trusted (installing from a checkout runs its build).
 */
export function chooseSource(wheelsDir: string, tags: PythonTags | undefined, checkouts: string[]): InstallSource | undefined {
  const wheel = chooseWheel(wheelsDir, tags);
  if (wheel) {
    return { kind: 'wheel', path: wheel };
  }
  const checkout = findCheckout(checkouts);
  return checkout ? { kind: 'checkout', path: checkout } : undefined;
}

function quote(text: string): string {
  return /\s/.test(text) ? `"${text}"` : text;
}

/** The arguments to give the interpreter. */
export function installArgs(source: InstallSource): string[] {
  return ['-m', 'pip', 'install', source.path];
}

/** The command as a user would type it. */
export function installCommand(python: string, source: InstallSource): string {
  return [python, ...installArgs(source)].map(quote).join(' ');
}

export function installHint(python: string, source: InstallSource | undefined): string {
  if (source) {
    return `memlens is not installed for ${python}. Install it with: ${installCommand(python, source)}`;
  }
  return (
    `memlens is not installed for ${python}, and it is not on the package index yet: build a wheel ` +
    `in a memlens checkout (./dev wheel) and install it with: ${quote(python)} -m pip install dist/memlens-*.whl ` +
    '(or install the checkout itself: pip install /path/to/memlens)'
  );
}

/** Runs a command; resolves with its exit code and output (never rejects). */
export type Runner = (command: string, args: string[], cwd: string) => Promise<{ code: number; output: string }>;

export const runProcess: Runner = (command, args, cwd) =>
  new Promise((resolve) => {
    execFile(command, args, { cwd, timeout: 15 * 60_000, maxBuffer: 16 * 1024 * 1024 }, (err, stdout, stderr) => {
      const code = err ? (typeof err.code === 'number' ? err.code : 1) : 0;
      resolve({ code, output: `${stdout}${stderr}${err && typeof err.code !== 'number' ? String(err.message) : ''}` });
    });
  });

/** The interpreter's tags (`-I`: nothing from the working directory or the environment runs). */
export async function probeTags(python: string, cwd: string, run: Runner = runProcess): Promise<PythonTags | undefined> {
  const { code, output } = await run(python, ['-I', '-c', TAGS_PROBE], cwd);
  return code === 0 ? parseTags(output) : undefined;
}

/**
 * Installs memlens into `python` from `source`. `cwd` must not be the workspace: `python -m`
 * puts it first on sys.path, so a planted `pip` package there would run instead of pip.
 */
export async function install(
  python: string,
  source: InstallSource,
  cwd: string,
  log: (line: string) => void,
  run: Runner = runProcess,
): Promise<boolean> {
  log(`installing memlens: ${installCommand(python, source)}`);
  const { code, output } = await run(python, installArgs(source), cwd);
  for (const line of output.split('\n')) {
    if (line.trim()) {
      log(line);
    }
  }
  log(code === 0 ? 'memlens installed' : `the install failed (exit code ${code})`);
  return code === 0;
}
