// The real VsCodeApi: a thin forwarder to `vscode`, with no logic of its own.
import * as vscode from 'vscode';
import { QuickPickItemLike, VsCodeApi } from './vscodeapi';

export const vscodeApi: VsCodeApi = {
  getSetting<T>(key: string, fallback: T): T {
    return vscode.workspace.getConfiguration('memlens').get<T>(key, fallback);
  },
  updateSetting(key: string, value: unknown): Thenable<void> {
    return vscode.workspace
      .getConfiguration('memlens')
      .update(key, value, vscode.ConfigurationTarget.Workspace);
  },
  isTrusted: () => vscode.workspace.isTrusted,
  showError: (message, ...actions) => vscode.window.showErrorMessage(message, ...actions),
  showInfo: (message, ...actions) => vscode.window.showInformationMessage(message, ...actions),
  showQuickPick<T extends QuickPickItemLike>(items: T[], placeHolder: string): Thenable<T | undefined> {
    return vscode.window.showQuickPick(items, { placeHolder });
  },
  showInputBox: (prompt, value) => vscode.window.showInputBox({ prompt, value }),
  activePythonFile(): vscode.Uri | undefined {
    const editor = vscode.window.activeTextEditor;
    return editor && editor.document.languageId === 'python' ? editor.document.uri : undefined;
  },
  copyToClipboard: (text) => vscode.env.clipboard.writeText(text),
};
