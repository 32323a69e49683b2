// memlens for VS Code: starts the memlens language server and adds commands, a status bar
// item and settings. Figures (inlay hints, hovers, lenses, diagnostics) all come from the server;
// the logic lives in src/common (tested with a stubbed API), this file only wires it to `vscode`.
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { ExecuteCommandRequest, LanguageClient, State } from 'vscode-languageclient/node';
import { pickRun, runFile, ServerLink, showSummary, splitArgs, toggleSetting } from './common/commands';
import { debounce } from './common/debounce';
import { chooseSource, install, installCommand, probeTags } from './common/install';
import { interpreterFromPythonApi, probeMessage, PythonExtensionApi, resolveInterpreter } from './common/interpreter';
import { needsRestart, readSettings } from './common/settings';
import { createClient, probeInterpreter } from './common/server';
import { RunLoaded, statusText } from './common/status';
import { vscodeApi } from './common/vscodeapiImpl';

const PYTHON_EXTENSION = 'ms-python.python';

let client: LanguageClient | undefined;
let lastState: RunLoaded | undefined;
let pythonEnvWatch: vscode.Disposable | undefined;

async function pythonApi(onChange: () => void): Promise<PythonExtensionApi | undefined> {
  const ext = vscode.extensions.getExtension(PYTHON_EXTENSION);
  if (!ext) {
    return undefined;
  }
  const api = (ext.isActive ? ext.exports : await ext.activate()) as
    | (PythonExtensionApi & { environments?: { onDidChangeActiveEnvironmentPath?: vscode.Event<unknown> } })
    | undefined;
  const event = api?.environments?.onDidChangeActiveEnvironmentPath;
  if (!pythonEnvWatch && event) {
    pythonEnvWatch = event(() => onChange());
  }
  return api;
}

export async function activate(context: vscode.ExtensionContext): Promise<void> {
  const output = vscode.window.createOutputChannel('memlens', { log: true });
  const status = vscode.window.createStatusBarItem('memlens.status', vscode.StatusBarAlignment.Left, 50);
  status.name = 'memlens';
  status.command = 'memlens.chooseRunToShow';
  context.subscriptions.push(output, status, { dispose: () => pythonEnvWatch?.dispose() });

  const refreshStatus = (): void => {
    const { text, tooltip } = statusText(lastState, new Date());
    status.text = text;
    status.tooltip = tooltip;
    status.show();
  };
  const ageTimer = setInterval(refreshStatus, 30_000);
  context.subscriptions.push({ dispose: () => clearInterval(ageTimer) });

  const send = (command: string, args: unknown[], token?: vscode.CancellationToken): Promise<unknown> => {
    if (!client || client.state !== State.Running) {
      return Promise.reject(new Error('the memlens server is not running (see the memlens output)'));
    }
    return client.sendRequest(ExecuteCommandRequest.type, { command, arguments: args }, token);
  };
  const link: ServerLink = { execute: (command, args) => send(command, args) };

  // Starts are serialised: a restart waits for the previous start/stop to finish.
  let queue: Promise<void> = Promise.resolve();
  let restart: () => void = () => undefined;
  const startOnce = async (): Promise<void> => {
    if (client) {
      const old = client;
      client = undefined;
      await old.stop().catch(() => undefined);
    }
    const folder = vscode.workspace.workspaceFolders?.[0]?.uri;
    const interpreter = await resolveInterpreter({
      setting: () => vscodeApi.getSetting<string>('interpreter', ''),
      home: os.homedir(),
      workspaceFolder: folder?.scheme === 'file' ? folder.fsPath : undefined,
      pythonExtension: async () => interpreterFromPythonApi(await pythonApi(() => restart()), folder),
      isTrusted: () => vscode.workspace.isTrusted,
    });
    output.info(`starting the server: ${interpreter.path} -m memlens lsp (interpreter from ${interpreter.source})`);
    const cwd = context.globalStorageUri.fsPath;
    await vscode.workspace.fs.createDirectory(context.globalStorageUri);
    const probe = await probeInterpreter(interpreter.path);
    if (probe !== 'ok') {
      // Where memlens can come from: a wheel shipped inside the extension, else a checkout
      // (the extension's own, or a trusted workspace folder's).
      const folders = vscode.workspace.isTrusted ? (vscode.workspace.workspaceFolders ?? []) : [];
      const checkouts = [path.dirname(context.extensionPath), ...folders.filter((f) => f.uri.scheme === 'file').map((f) => f.uri.fsPath)];
      const tags = probe === 'missing-memlens' ? await probeTags(interpreter.path, cwd) : undefined;
      const source = chooseSource(path.join(context.extensionPath, 'wheels'), tags, checkouts);
      const problem = probeMessage(interpreter.path, probe, source) ?? '';
      output.error(problem);
      const installNow = 'Install memlens';
      const copy = 'Copy Install Command';
      const open = 'Open Settings';
      const actions = source && probe === 'missing-memlens' ? [installNow, copy, open] : [open];
      void vscodeApi.showError(problem, ...actions).then(async (choice) => {
        if (choice === installNow && source) {
          const done = await vscode.window.withProgress(
            { location: vscode.ProgressLocation.Notification, title: 'memlens: installing memlens…' },
            () => install(interpreter.path, source, cwd, (line) => output.info(line)),
          );
          if (done) {
            restart();
          } else {
            output.show(true);
            void vscodeApi.showError('memlens: the install failed; the memlens output says why.');
          }
        } else if (choice === copy && source) {
          await vscodeApi.copyToClipboard(installCommand(interpreter.path, source));
        } else if (choice === open) {
          await vscode.commands.executeCommand('workbench.action.openSettings', 'memlens.interpreter');
        }
      });
      return;
    }
    const next = createClient(interpreter.path, readSettings(vscodeApi.getSetting), output, cwd);
    next.onNotification('memlens/runLoaded', (params: RunLoaded) => {
      lastState = params;
      refreshStatus();
    });
    client = next;
    await next.start();
  };
  const start = (): Promise<void> => {
    queue = queue
      .then(startOnce)
      .catch((err: unknown) => output.error(`cannot start the server: ${String(err)}`));
    return queue;
  };
  restart = debounce(() => void start(), 500);

  const runWithProgress = async (uri: vscode.Uri | undefined, args: string[]): Promise<void> => {
    await vscode.window.withProgress(
      { location: vscode.ProgressLocation.Notification, title: 'memlens', cancellable: true },
      async (progress, token) => {
        progress.report({ message: `profiling ${uri ? vscode.workspace.asRelativePath(uri) : ''}…` });
        const cancellable: ServerLink = { execute: (command, cmdArgs) => send(command, cmdArgs, token) };
        try {
          await runFile(vscodeApi, cancellable, uri?.toString(), args);
        } catch (err) {
          if (!token.isCancellationRequested) {
            void vscodeApi.showError(`memlens: ${err instanceof Error ? err.message : String(err)}`);
          }
        }
      },
    );
  };
  const guarded =
    <A extends unknown[]>(fn: (...args: A) => Promise<unknown>) =>
    async (...args: A): Promise<void> => {
      try {
        await fn(...args);
      } catch (err) {
        void vscodeApi.showError(`memlens: ${err instanceof Error ? err.message : String(err)}`);
      }
    };

  context.subscriptions.push(
    vscode.commands.registerCommand('memlens.runCurrentFile', (uri?: vscode.Uri) =>
      runWithProgress(uri instanceof vscode.Uri ? uri : vscodeApi.activePythonFile(), []),
    ),
    vscode.commands.registerCommand('memlens.runFileWithArgs', async (uri?: vscode.Uri) => {
      const target = uri instanceof vscode.Uri ? uri : vscodeApi.activePythonFile();
      const line = await vscodeApi.showInputBox('Arguments for the program (shell-style quoting)');
      if (line !== undefined) {
        await runWithProgress(target, splitArgs(line));
      }
    }),
    vscode.commands.registerCommand(
      'memlens.setBaselineRun',
      guarded(() => pickRun(vscodeApi, link, 'baseline', vscodeApi.activeWorkspaceFolder())),
    ),
    vscode.commands.registerCommand(
      'memlens.chooseRunToShow',
      guarded(() => pickRun(vscodeApi, link, 'show', vscodeApi.activeWorkspaceFolder())),
    ),
    vscode.commands.registerCommand(
      'memlens.compareWithBaseline',
      guarded(() => toggleSetting(vscodeApi, 'compareWithBaseline', false)),
    ),
    vscode.commands.registerCommand(
      'memlens.toggleAnnotations',
      guarded(() => toggleSetting(vscodeApi, 'inlayHints.enabled', true)),
    ),
    vscode.commands.registerCommand(
      'memlens.showRunSummary',
      guarded(() => showSummary(vscodeApi, link, vscodeApi.activeWorkspaceFolder())),
    ),
    vscode.commands.registerCommand('memlens.restartServer', () => start()),
    vscode.workspace.onDidChangeConfiguration((event) => {
      const running = client !== undefined && client.state === State.Running;
      if (needsRestart((section) => event.affectsConfiguration(section), running)) {
        restart();
      }
    }),
    // Trusting the workspace may change the interpreter (the Python extension's pick is used then).
    vscode.workspace.onDidGrantWorkspaceTrust(() => restart()),
  );
  refreshStatus();
  await start();
}

export async function deactivate(): Promise<void> {
  if (client) {
    const old = client;
    client = undefined;
    await old.stop();
  }
}
