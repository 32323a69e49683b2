// The slice of the VS Code API the extension uses, as an interface: the real implementation
// (vscodeapiImpl.ts) forwards to `vscode`; unit tests pass sinon fakes. Only type imports here,
// so this module loads under plain Node (mocha) too.
import type * as vscode from 'vscode';

export interface QuickPickItemLike {
  label: string;
  description?: string;
  detail?: string;
}

export interface VsCodeApi {
  getSetting<T>(key: string, fallback: T): T;
  updateSetting(key: string, value: unknown): Thenable<void>;
  isTrusted(): boolean;
  showError(message: string, ...actions: string[]): Thenable<string | undefined>;
  showInfo(message: string, ...actions: string[]): Thenable<string | undefined>;
  showQuickPick<T extends QuickPickItemLike>(items: T[], placeHolder: string): Thenable<T | undefined>;
  showInputBox(prompt: string, value?: string): Thenable<string | undefined>;
  activePythonFile(): vscode.Uri | undefined;
  copyToClipboard(text: string): Thenable<void>;
}
