// memlens for VS Code: starts the memlens language server and adds commands, a status bar
// item and settings. Figures (inlay hints, hovers, lenses, diagnostics) all come from the server;
// the logic lives in src/common (tested with a stubbed API), this file only wires it to `vscode`.
import { execFile, spawn } from 'child_process';
import * as os from 'os';
import * as path from 'path';
import * as vscode from 'vscode';
import { DidChangeConfigurationNotification, ExecuteCommandRequest, LanguageClient, State } from 'vscode-languageclient/node';
import { AttachChild, AttachHost, attachToProcess, lastMessage } from './common/attach';
import { pickRun, runSpec, ServerLink, showSummary, splitArgs } from './common/commands';
import { debounce } from './common/debounce';
import { chooseSource, install, installCommand, probeTags } from './common/install';
import { interpreterFromPythonApi, probeMessage, PythonExtensionApi, resolveInterpreter } from './common/interpreter';
import { DOCUMENT_RUN, JUMP_TO_PEAK, LINE_CHANGES, RUN_LOADED, SET_MOMENT, TIMELINE } from './common/protocol';
import { needsRestart, readSettings } from './common/settings';
import { createClient, probeInterpreter } from './common/server';
import { MomentInfo, pickState, RunLoaded, RunLoadedParams, splitLoaded, stateKey, statusText } from './common/status';
import { momentSpec, readMessage, shownText, TimelineResult, timelineHtml } from './common/timeline';
import { applyUi, toggleUi, uiValue, UiToggle } from './common/uistate';
import { vscodeApi } from './common/vscodeapiImpl';

const PYTHON_EXTENSION = 'ms-python.python';

let client: LanguageClient | undefined;
let interpreterPath: string | undefined;
/** What each workspace folder shows, per kind of run (memlens/runLoaded). */
const states = new Map<string, RunLoaded>();
/** Which of them the active editor's figures come from (memlens.documentRun). */
let shown: { workspace: string; kind: string } | null = null;
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
    const { text, tooltip } = statusText(pickState(states, shown), new Date());
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
    interpreterPath = interpreter.path;
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
    const settings = applyUi(readSettings(vscodeApi.getSetting), context.workspaceState);
    const next = createClient(interpreter.path, settings, output, cwd, context.workspaceState);
    next.onNotification(RUN_LOADED, (params: RunLoadedParams) => {
      for (const state of splitLoaded(params)) {
        states.set(stateKey(state.workspace, state.kind), state);
      }
      refreshStatus();
      followEditor();
      repaint();
      void timelinePanel?.webview.postMessage({ shown: params.moment ?? null, text: shownText(params.moment) });
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

  // The program runs in a terminal of its own (the program is the terminal's process): its
  // output is visible and stays after it ends, input and colours work, Ctrl+C stops it (the run
  // is still written). One memlens terminal at a time: the next run replaces the terminal of a
  // run that has ended, and a run still going is not interrupted. The server's watcher loads
  // the new run.
  let runTerminal: vscode.Terminal | undefined;
  context.subscriptions.push(
    vscode.window.onDidCloseTerminal((closed) => {
      if (closed === runTerminal) {
        runTerminal = undefined;
      }
    }),
  );
  const runInTerminal = async (uri: vscode.Uri | undefined, args: string[]): Promise<void> => {
    const folder = uri ? vscode.workspace.getWorkspaceFolder(uri) : undefined;
    const spec = runSpec(
      vscodeApi,
      interpreterPath,
      uri?.fsPath,
      folder?.uri.scheme === 'file' ? folder.uri.fsPath : undefined,
      args,
    );
    if (!spec || !uri || !folder) {
      return;
    }
    if (runTerminal && runTerminal.exitStatus === undefined) {
      runTerminal.show(true);
      void vscodeApi.showError(`memlens: ${runTerminal.name} is still running; stop it in its terminal (Ctrl+C) first.`);
      return;
    }
    runTerminal?.dispose();
    runTerminal = vscode.window.createTerminal({
      name: `memlens run ${vscode.workspace.asRelativePath(uri, false)}`,
      shellPath: spec.command,
      shellArgs: spec.args,
      cwd: spec.cwd,
    });
    runTerminal.show(true);
  };
  // Comparison mode colours: lines that hold more than in the baseline, less, or are new, three
  // intensities by the size of the change (the server leaves changes within the noise out); the
  // overview ruler marks them.
  const colour = (name: string, ruler: string): vscode.TextEditorDecorationType =>
    vscode.window.createTextEditorDecorationType({
      isWholeLine: true,
      backgroundColor: new vscode.ThemeColor(name),
      overviewRulerColor: new vscode.ThemeColor(ruler),
      overviewRulerLane: vscode.OverviewRulerLane.Right,
    });
  const rulers: Record<string, string> = {
    more: 'editorOverviewRuler.deletedForeground',
    less: 'editorOverviewRuler.addedForeground',
    new: 'editorOverviewRuler.modifiedForeground',
  };
  const decorations: Record<string, vscode.TextEditorDecorationType> = {};
  for (const [kind, ruler] of Object.entries(rulers)) {
    for (const level of [1, 2, 3]) {
      const name = `memlens.compare${kind[0].toUpperCase()}${kind.slice(1)}${level}`;
      decorations[`${kind}${level}`] = colour(name, ruler);
    }
  }
  context.subscriptions.push(...Object.values(decorations));
  const comparing = (): boolean =>
    uiValue(context.workspaceState, 'compareWithBaseline', vscodeApi.getSetting<boolean>('compareWithBaseline', false)) &&
    [...states.values()].some((state) => Boolean(state.baseline));
  const paint = async (): Promise<void> => {
    for (const editor of vscode.window.visibleTextEditors) {
      const byKind: Record<string, vscode.Range[]> = Object.fromEntries(Object.keys(decorations).map((k) => [k, []]));
      if (comparing() && editor.document.languageId === 'python' && editor.document.uri.scheme === 'file') {
        try {
          const result = (await send(LINE_CHANGES, [{ uri: editor.document.uri.toString() }])) as {
            changes: { line: number; kind: string; level?: number }[];
          } | null;
          for (const c of result?.changes ?? []) {
            byKind[`${c.kind}${Math.min(3, Math.max(1, c.level ?? 2))}`]?.push(new vscode.Range(c.line, 0, c.line, 0));
          }
        } catch {
          // the server is not running: no colours
        }
      }
      for (const [kind, type] of Object.entries(decorations)) {
        editor.setDecorations(type, byKind[kind]);
      }
    }
  };
  // The status bar shows the run the active editor's figures come from (a program's or a test
  // suite's, memlens.documentRun).
  const follow = async (): Promise<void> => {
    const uri = vscodeApi.activePythonFile();
    if (uri && client && client.state === State.Running) {
      try {
        const found = (await send(DOCUMENT_RUN, [{ uri: uri.toString() }])) as { workspace: string; kind: string } | null;
        shown = found ? { workspace: found.workspace, kind: found.kind } : null;
      } catch {
        shown = null;
      }
    }
    refreshStatus();
  };
  const followEditor = debounce(() => void follow(), 200);
  const repaint = debounce(() => void paint(), 300);
  // A UI toggle: kept in the workspace state; the server re-reads its settings.
  const toggle = async (key: UiToggle, fallback: boolean): Promise<void> => {
    await toggleUi(context.workspaceState, key, vscodeApi.getSetting<boolean>(key, fallback));
    if (client && client.state === State.Running) {
      await client.sendNotification(DidChangeConfigurationNotification.type, { settings: null });
    }
    repaint();
  };
  // The moment the editor shows (memlens.setMoment; the server's, for every folder and kind of
  // run): the status bar and the timeline follow it.
  const showMoment = (moment: MomentInfo | null): void => {
    for (const [key, state] of states) {
      states.set(key, { ...state, moment });
    }
    refreshStatus();
    void timelinePanel?.webview.postMessage({ shown: moment, text: shownText(moment) });
  };
  // Which run a command is about: the active folder, and the Python file shown (its kind of run).
  const shownArgs = (): Record<string, string> => {
    const folder = vscodeApi.activeWorkspaceFolder();
    const uri = vscodeApi.activePythonFile()?.toString();
    return { ...(folder ? { workspace: folder } : {}), ...(uri ? { uri } : {}) };
  };
  const setMoment = async (spec: string | null, where: Record<string, string> = shownArgs()): Promise<void> => {
    const moment = (await send(SET_MOMENT, [{ moment: spec, ...where }])) as MomentInfo | null;
    showMoment(moment);
  };
  const jumpToPeak = async (where: Record<string, string> = shownArgs()): Promise<void> => {
    const answer = (await send(JUMP_TO_PEAK, [where])) as {
      moment: MomentInfo | null;
      file: string | null;
      line: number | null;
    };
    showMoment(answer.moment);
    if (answer.file && answer.line) {
      await vscodeApi.openLocation(answer.file, answer.line);
    }
  };
  let timelinePanel: vscode.WebviewPanel | undefined;
  let timelineListener: vscode.Disposable | undefined;
  const showTimeline = async (): Promise<void> => {
    // The view's clicks are about the run it shows (the webview has the focus then).
    const where = shownArgs();
    const result = (await send(TIMELINE, [where])) as TimelineResult;
    if (!timelinePanel) {
      timelinePanel = vscode.window.createWebviewPanel('memlens.timelinePanel', 'memlens: Timeline', vscode.ViewColumn.Beside, {
        enableScripts: true,
        localResourceRoots: [],
      });
      timelinePanel.onDidDispose(() => {
        timelinePanel = undefined;
        timelineListener?.dispose();
        timelineListener = undefined;
      });
    }
    const panel = timelinePanel;
    const nonce = Array.from({ length: 24 }, () => Math.floor(Math.random() * 36).toString(36)).join('');
    panel.webview.html = timelineHtml(result, nonce);
    timelineListener?.dispose();
    timelineListener = panel.webview.onDidReceiveMessage(async (raw: unknown) => {
      const msg = readMessage(raw);
      try {
        if (msg && 'open' in msg) {
          const row = result.top[msg.open];
          if (row) {
            await vscodeApi.openLocation(row.file, row.line);
          }
        } else if (msg && 'moment' in msg) {
          await setMoment(typeof msg.moment === 'number' ? momentSpec(msg.moment) : msg.moment, where);
        } else if (msg && 'peak' in msg) {
          await jumpToPeak(where);
        } else if (msg && 'clear' in msg) {
          await setMoment(null, where);
        }
      } catch (err) {
        void vscodeApi.showError(`memlens: ${err instanceof Error ? err.message : String(err)}`);
      }
    });
    panel.reveal(vscode.ViewColumn.Beside, true);
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
      runInTerminal(uri instanceof vscode.Uri ? uri : vscodeApi.activePythonFile(), []),
    ),
    vscode.commands.registerCommand('memlens.runFileWithArgs', async (uri?: vscode.Uri) => {
      const target = uri instanceof vscode.Uri ? uri : vscodeApi.activePythonFile();
      const line = await vscodeApi.showInputBox('Arguments for the program (shell-style quoting)');
      if (line !== undefined) {
        await runInTerminal(target, splitArgs(line));
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
      guarded(() => toggle('compareWithBaseline', false)),
    ),
    vscode.commands.registerCommand(
      'memlens.toggleAnnotations',
      guarded(() => toggle('inlayHints.enabled', true)),
    ),
    vscode.commands.registerCommand(
      'memlens.showRunSummary',
      guarded(() => showSummary(vscodeApi, link, vscodeApi.activeWorkspaceFolder(), vscodeApi.activePythonFile()?.toString())),
    ),
    vscode.commands.registerCommand(
      'memlens.attachToProcess',
      guarded(() => {
        const folder = vscode.workspace.workspaceFolders?.find((f) => f.uri.scheme === 'file');
        return attachToProcess(vscodeApi, attachHost(output, context), interpreterPath, folder?.uri.fsPath);
      }),
    ),
    vscode.commands.registerCommand('memlens.restartServer', () => start()),
    vscode.commands.registerCommand('memlens.showTimeline', guarded(showTimeline)),
    vscode.commands.registerCommand('memlens.goToPeak', guarded(() => jumpToPeak())),
    vscode.commands.registerCommand(
      'memlens.showWholeRun',
      guarded(() => setMoment(null)),
    ),
    vscode.window.onDidChangeVisibleTextEditors(() => repaint()),
    vscode.window.onDidChangeActiveTextEditor(() => followEditor()),
    vscode.workspace.onDidChangeTextDocument((e) => {
      if (comparing() && vscode.window.visibleTextEditors.some((ed) => ed.document === e.document)) {
        repaint();
      }
    }),
    vscode.workspace.onDidChangeConfiguration((event) => {
      const running = client !== undefined && client.state === State.Running;
      if (needsRestart((section) => event.affectsConfiguration(section), running)) {
        output.info(`settings changed (the interpreter, or with no server running): restarting`);
        restart();
      }
    }),
    // Trusting the workspace may change the interpreter (the Python extension's pick is used then).
    vscode.workspace.onDidGrantWorkspaceTrust(() => {
      output.info('workspace trusted: restarting');
      restart();
    }),
  );
  refreshStatus();
  await start();
}

/** memlens attach as child processes of the extension host, and VS Code's progress. */
function attachHost(output: vscode.LogOutputChannel, context: vscode.ExtensionContext): AttachHost {
  return {
    output: (interpreter, args) =>
      new Promise((resolve, reject) => {
        execFile(interpreter, args, { timeout: 60_000, maxBuffer: 16 << 20 }, (err, stdout, stderr) => {
          if (err) {
            reject(new Error(lastMessage(String(stderr).split('\n')) ?? err.message));
          } else {
            resolve(String(stdout));
          }
        });
      }),
    spawn(interpreter, args, cwd): AttachChild {
      output.info(`${interpreter} ${args.join(' ')}`);
      const proc = spawn(interpreter, args, { cwd, stdio: ['ignore', 'ignore', 'pipe'] });
      // Closing VS Code detaches too: the process is left as it was, and the run is written.
      const detach = { dispose: () => proc.exitCode === null && proc.kill('SIGINT') };
      context.subscriptions.push(detach);
      const listeners: ((line: string) => void)[] = [];
      let pending = '';
      proc.stderr.setEncoding('utf8');
      proc.stderr.on('data', (chunk: string) => {
        const parts = (pending + chunk).split('\n');
        pending = parts.pop() ?? '';
        for (const line of parts) {
          output.info(line);
          listeners.forEach((l) => l(line));
        }
      });
      return {
        onLine: (listener) => listeners.push(listener),
        stop: () => proc.kill('SIGINT'),
        exited: new Promise((resolve) => {
          proc.on('error', (err) => {
            listeners.forEach((l) => l(`memlens: cannot start ${interpreter}: ${err.message}`));
            resolve(null);
          });
          proc.on('close', (code) => resolve(code));
        }),
      };
    },
    withProgress: (title, task) =>
      vscode.window.withProgress({ location: vscode.ProgressLocation.Notification, title, cancellable: true }, (p, token) =>
        task({ report: (message) => p.report({ message }), onCancel: (listener) => token.onCancellationRequested(listener) }),
      ),
  };
}

export async function deactivate(): Promise<void> {
  if (client) {
    const old = client;
    client = undefined;
    await old.stop();
  }
}
