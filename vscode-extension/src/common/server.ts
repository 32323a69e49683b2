// Starting the language server process: `<python> -m memlens lsp` over stdio.
import { execFile } from 'child_process';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions } from 'vscode-languageclient/node';
import { ProbeResult } from './interpreter';
import { RUN_FILE } from './protocol';
import { ServerSettings } from './settings';
import { filterLenses, mayExecuteServerCommand, UNTRUSTED_MESSAGE } from './trust';
import { overlay, StateStore } from './uistate';

/** Checks, without blocking the extension host, that `python` exists and has memlens + its server. */
export function probeInterpreter(python: string): Promise<ProbeResult> {
  return new Promise((resolve) => {
    execFile(python, ['-c', 'import memlens, memlens_lsp'], { timeout: 30000 }, (err) => {
      if (!err) {
        resolve('ok');
      } else if ((err as NodeJS.ErrnoException).code === 'ENOENT' || (err as NodeJS.ErrnoException).code === 'EACCES') {
        resolve('missing-interpreter');
      } else {
        resolve('missing-memlens');
      }
    });
  });
}

export function createClient(
  python: string,
  settings: ServerSettings,
  output: vscode.LogOutputChannel,
  cwd: string,
  ui: StateStore,
): LanguageClient {
  // No `transport`: with TransportKind.stdio vscode-languageclient appends `--stdio`, which
  // `memlens lsp` does not take; without it the client still talks over the process's stdio.
  // `cwd` is the extension's own storage folder, never the workspace: `python -m` puts the
  // working directory first on sys.path, so a `memlens` package planted in an untrusted
  // workspace would otherwise run instead of the installed one.
  const serverOptions: ServerOptions = {
    command: python,
    args: ['-m', 'memlens', 'lsp'],
    options: { cwd },
  };
  const clientOptions: LanguageClientOptions = {
    // Python files, and the Python cells of notebooks (their figures come from %%memlens runs;
    // the server asks for notebook document sync, LSP 3.17).
    documentSelector: [
      { scheme: 'file', language: 'python' },
      { scheme: 'vscode-notebook-cell', language: 'python' },
    ],
    initializationOptions: settings,
    outputChannel: output,
    synchronize: { configurationSection: 'memlens' },
    middleware: {
      executeCommand: async (command, args, next) => {
        if (!mayExecuteServerCommand(command, vscode.workspace.isTrusted)) {
          void vscode.window.showErrorMessage(UNTRUSTED_MESSAGE);
          return undefined;
        }
        return next(command, args);
      },
      provideCodeLenses: async (document, token, next) => {
        const lenses = await next(document, token);
        if (!lenses) {
          return lenses;
        }
        // "Run under memlens" runs in a terminal, like the Run Current File command.
        for (const lens of lenses) {
          if (lens.command?.command === RUN_FILE) {
            lens.command = { title: lens.command.title, command: 'memlens.runCurrentFile', arguments: [document.uri] };
          }
        }
        return filterLenses(lenses, vscode.workspace.isTrusted);
      },
      workspace: {
        // The UI toggles (workspace state) override the settings of the same names.
        configuration: async (params, token, next) => {
          const result = await next(params, token);
          if (!Array.isArray(result)) {
            return result;
          }
          return result.map((section, i) => (params.items[i]?.section === 'memlens' ? overlay(section, ui) : section));
        },
      },
    },
  };
  return new LanguageClient('memlens', 'memlens', serverOptions, clientOptions);
}
