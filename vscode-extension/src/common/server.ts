// Starting and stopping the language server process: `<python> -m memlens lsp`.
import { spawnSync } from 'child_process';
import * as vscode from 'vscode';
import { LanguageClient, LanguageClientOptions, ServerOptions, TransportKind } from 'vscode-languageclient/node';
import { ServerSettings } from './settings';

export function memlensInstalled(python: string): boolean {
  const probe = spawnSync(python, ['-c', 'import memlens_server, memlens'], { timeout: 20000 });
  return probe.status === 0;
}

export function createClient(
  python: string,
  settings: ServerSettings,
  output: vscode.LogOutputChannel,
): LanguageClient {
  const serverOptions: ServerOptions = {
    command: python,
    args: ['-m', 'memlens', 'lsp'],
    transport: TransportKind.stdio,
  };
  const clientOptions: LanguageClientOptions = {
    documentSelector: [{ scheme: 'file', language: 'python' }],
    initializationOptions: settings,
    outputChannel: output,
    traceOutputChannel: output,
    synchronize: { configurationSection: 'memlens' },
  };
  return new LanguageClient('memlens', 'memlens', serverOptions, clientOptions);
}
