// Which Python runs `-m memlens lsp`: the memlens.interpreter setting, else the interpreter
// selected in the Python extension, else python3. In an untrusted workspace the Python
// extension's pick is skipped (it may be a venv inside the workspace); VS Code already ignores
// workspace values of memlens.interpreter there (a restricted setting).
import { InstallSource, installHint } from './install';

export interface InterpreterSources {
  /** memlens.interpreter as written; `~` and `${workspaceFolder}` are expanded (see expandPath). */
  setting(): string;
  /** For expanding the setting: the user's home and the first workspace folder's path. */
  home?: string;
  workspaceFolder?: string;
  /** The Python extension's selected interpreter for a folder, if the extension is there. */
  pythonExtension(): Promise<string | undefined>;
  /** Workspace trust; absent means trusted. */
  isTrusted?(): boolean;
}

export interface Interpreter {
  path: string;
  source: 'setting' | 'python-extension' | 'default';
}

export async function resolveInterpreter(sources: InterpreterSources): Promise<Interpreter> {
  const fromSetting = expandPath(sources.setting().trim(), sources.home, sources.workspaceFolder);
  if (fromSetting) {
    return { path: fromSetting, source: 'setting' };
  }
  if (sources.isTrusted?.() ?? true) {
    try {
      const fromExtension = await sources.pythonExtension();
      if (fromExtension) {
        return { path: fromExtension, source: 'python-extension' };
      }
    } catch {
      // The Python extension is missing or not ready: fall back to the default.
    }
  }
  return { path: 'python3', source: 'default' };
}

/** Expands a leading `~` and `${workspaceFolder}` / `${userHome}` in a path setting. */
export function expandPath(value: string, home?: string, workspaceFolder?: string): string {
  let out = value;
  if (home && (out === '~' || out.startsWith('~/'))) {
    out = home + out.slice(1);
  }
  if (home) {
    out = out.split('${userHome}').join(home);
  }
  if (workspaceFolder) {
    out = out.split('${workspaceFolder}').join(workspaceFolder);
  }
  return out;
}

/** The Python extension's API (ms-python.python exports), only the parts we read. */
export interface PythonExtensionApi {
  settings?: { getExecutionDetails?(resource?: unknown): { execCommand?: string[] | undefined } | undefined };
  environments?: { getActiveEnvironmentPath?(resource?: unknown): { path?: string } | undefined };
}

/**
 * The interpreter the Python extension selected for `resource`: the active environment's path,
 * else the execution command when it is a bare interpreter (not e.g. `conda run ...`).
 */
export function interpreterFromPythonApi(api: PythonExtensionApi | undefined, resource?: unknown): string | undefined {
  const path = api?.environments?.getActiveEnvironmentPath?.(resource)?.path;
  if (path) {
    return path;
  }
  const command = api?.settings?.getExecutionDetails?.(resource)?.execCommand;
  if (command && command.length === 1 && command[0]) {
    return command[0];
  }
  return undefined;
}

/** Why the probe of an interpreter failed, for the user. */
export type ProbeResult = 'ok' | 'missing-interpreter' | 'missing-memlens';

/** `source`: where memlens can be installed from (install.ts), if anywhere. */
export function probeMessage(python: string, result: ProbeResult, source?: InstallSource): string | undefined {
  if (result === 'missing-interpreter') {
    return `memlens: cannot start Python "${python}". Set memlens.interpreter or select an interpreter in the Python extension.`;
  }
  if (result === 'missing-memlens') {
    return installHint(python, source);
  }
  return undefined;
}
