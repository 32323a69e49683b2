// memlens for VS Code: starts the memlens language server and adds commands, a status bar
// item and settings. Figures (inlay hints, hovers, lenses, diagnostics) all come from the server.
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient, State } from 'vscode-languageclient/node';
import { pickRun, runFile, ServerLink, splitArgs, summaryText, toggleSetting } from './common/commands';
import { debounce } from './common/debounce';
import { installHint, resolveInterpreter } from './common/interpreter';
import { needsRestart, readSettings } from './common/settings';
import { createClient, memlensInstalled } from './common/server';
import { RunLoaded, statusText } from './common/status';
import { vscodeApi } from './common/vscodeapiImpl';

let client: LanguageClient | undefined;
let lastState: RunLoaded | undefined;

async function pythonFromExtension(): Promise<string | undefined> {
  const ext = vscode.extensions.getExtension('ms-python.python');
  if (!ext) {
    return undefined;
  }
  const api = ext.isActive ? ext.exports : await ext.activate();
  const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
  const details = api?.settings?.getExecutionDetails?.(folder);
  const command: string[] | undefined = details?.execCommand;
  if (command && command.length > 0) {
    return command[0];
  }
  const env = api?.environments?.getActiveEnvironmentPath?.(folder);
  return env?.path;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('memlens', { log: true });
  const status = vscode.window.createStatusBarItem(vscode.StatusBarAlignment.Left, 50);
  status.command = 'memlens.chooseRunToShow';
  context.subscriptions.push(output, status);

  const refreshStatus = (): void => {
    const { text, tooltip } = statusText(lastState, new Date());
    status.text = text;
    status.tooltip = tooltip;
    status.show();
  };
  const ageTimer = setInterval(refreshStatus, 30_000);
  context.subscriptions.push({ dispose: () => clearInterval(ageTimer) });

  const link: ServerLink = {
    execute: async (command, args) => {
      if (!client || client.state !== State.Running) {
        throw new Error('the memlens server is not running');
      }
      return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args });
    },
  };

  const start = async (): Promise<void> => {
    if (client) {
      const old = client;
      client = undefined;
      await old.stop().catch(() => undefined);
    }
    const interpreter = await resolveInterpreter({
      setting: () => vscodeApi.getSetting<string>('interpreter', ''),
      pythonExtension: pythonFromExtension,
    });
    output.info(`memlens: starting the server with ${interpreter.path} (${interpreter.source})`);
    if (!memlensInstalled(interpreter.path)) {
      const hint = installHint(interpreter.path);
      output.error(hint);
      const copy = 'Copy install command';
      const choice = await vscodeApi.showError(hint, copy);
      if (choice === copy) {
        await vscodeApi.copyToClipboard(`${interpreter.path} -m pip install memlens`);
      }
      return;
    }
    const next = createClient(interpreter.path, readSettings(vscodeApi.getSetting), output);
    next.onNotification('memlens/runLoaded', (params: RunLoaded) => {
      lastState = params;
      refreshStatus();
    });
    client = next;
    await next.start();
  };
  const restart = debounce(() => {
    void start().catch((err: unknown) => output.error(`memlens: cannot start the server: ${String(err)}`));
  }, 500);

  const runWithProgress = async (uri: vscode.Uri | undefined, args: string[]): Promise<void> => {
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'memlens', cancellable: true },
      async (progress, token) => {
        progress.report({ message: `profiling ${uri ? vscode.workspace.asRelativePath(uri) : ''}…` });
        const cancellable: ServerLink = {
          execute: (command, cmdArgs) => {
            if (!client) {
              return Promise.reject(new Error('the memlens server is not running'));
            }
            return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: cmdArgs }, token);
          },
        };
        await runFile(vscodeApi, cancellable, uri?.toString(), args);
      },
    );
  };

  context.subscriptions.push(
    vscode.commands.registerCommand('memlens.runCurrentFile', (uri?: vscode.Uri) =>
      runWithProgress(uri ?? vscodeApi.activePythonFile(), []),
    ),
    vscode.commands.registerCommand('memlens.runFileWithArgs', async (uri?: vscode.Uri) => {
      const line = await vscodeApi.showInputBox('Arguments for the program');
      if (line !== undefined) {
        await runWithProgress(uri ?? vscodeApi.activePythonFile(), splitArgs(line));
      }
    }),
    vscode.commands.registerCommand('memlens.setBaselineRun', () => pickRun(vscodeApi, link, 'baseline')),
    vscode.commands.registerCommand('memlens.chooseRunToShow', () => pickRun(vscodeApi, link, 'show')),
    vscode.commands.registerCommand('memlens.compareWithBaseline', () =>
      toggleSetting(vscodeApi, 'compareWithBaseline', false),
    ),
    vscode.commands.registerCommand('memlens.toggleAnnotations', () =>
      toggleSetting(vscodeApi, 'inlayHints.enabled', true),
    ),
    vscode.commands.registerCommand('memlens.showRunSummary', async () => {
      const summary = (await link.execute('memlens.summary', [{}])) as Parameters<typeof summaryText>[0];
      await vscodeApi.showInfo(summaryText(summary));
    }),
    vscode.commands.registerCommand('memlens.restartServer', () => start()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      if (needsRestart((section) => event.affectsConfiguration(section))) {
        restart();
      }
    }),
    vscode.workspace.onDidGrantWorkspaceTrust(() => refreshStatus()),
  );
  const pythonExt = vscode.extensions.getExtension('ms-python.python');
  const envApi = pythonExt?.isActive ? pythonExt.exports?.environments : undefined;
  if (envApi?.onDidChangeActiveEnvironmentPath) {
    context.subscriptions.push(envApi.onDidChangeActiveEnvironmentPath(() => restart()));
  }
  refreshStatus();
  await start();
}

export async function deactivate(): Promise<void> {
  if (client) {
    await client.stop();
    client = undefined;
  }
}
