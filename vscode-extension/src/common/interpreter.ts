// Which Python runs `-m memlens lsp`: the memlens.interpreter setting, else the interpreter
// selected in the Python extension, else python3.

export interface InterpreterSources {
  setting(): string;
  /** The Python extension's selected interpreter for a folder, if the extension is there. */
  pythonExtension(): Promise<string | undefined>;
}

export interface Interpreter {
  path: string;
  source: 'setting' | 'python-extension' | 'default';
}

export async function resolveInterpreter(sources: InterpreterSources): Promise<Interpreter> {
  const fromSetting = sources.setting().trim();
  if (fromSetting) {
    return { path: fromSetting, source: 'setting' };
  }
  try {
    const fromExtension = await sources.pythonExtension();
    if (fromExtension) {
      return { path: fromExtension, source: 'python-extension' };
    }
  } catch {
    // The Python extension is missing or not ready: fall back to the default.
  }
  return { path: 'python3', source: 'default' };
}

export function installHint(python: string): string {
  const quoted = /\s/.test(python) ? `"${python}"` : python;
  return `memlens is not installed for ${python}. Install it with: ${quoted} -m pip install memlens`;
}
