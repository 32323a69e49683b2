// "memlens: Attach to Running Python Process…": pick a Python process (from `memlens attach
// --list-json`), run `memlens attach PID` with a progress notification whose Cancel button
// detaches (SIGINT: the run is written), and let the server's run watcher load the new run like
// any other. Written against small interfaces (AttachHost, VsCodeApi) so that unit tests drive
// it with fakes; extension.ts wires them to child_process and vscode.window.withProgress.
import { mayRunCode, UNTRUSTED_MESSAGE } from './trust';
import { QuickPickItemLike, VsCodeApi } from './vscodeapi';

/** One entry of `memlens attach --list-json` (docs/attach.md). */
export interface ListedProcess {
  pid: number;
  command: string[];
  user: string;
  python: string | null;
  attachable: boolean;
  problem: string | null;
}

export interface ProcessPickItem extends QuickPickItemLike {
  process: ListedProcess;
}

/** A running `memlens attach`: its stderr lines as they come, a stop, and how it ended. */
export interface AttachChild {
  onLine(listener: (line: string) => void): void;
  /** Detach (SIGINT, as Ctrl-C): the process writes its run, then memlens attach ends. */
  stop(): void;
  /** The exit code (null: ended by a signal). */
  exited: Promise<number | null>;
}

/** Progress shown while attached: `report` changes its message; `cancelled` fires on Cancel. */
export interface Progress {
  report(message: string): void;
  onCancel(listener: () => void): void;
}

export interface AttachHost {
  /** Runs `interpreter args...` to its end; its stdout, or a rejection with the reason. */
  output(interpreter: string, args: string[]): Promise<string>;
  spawn(interpreter: string, args: string[], cwd: string): AttachChild;
  withProgress<T>(title: string, task: (progress: Progress) => Promise<T>): Thenable<T>;
}

/** The processes of `memlens attach --list-json` (entries of the wrong shape are left out). */
export function parseProcessList(text: string): ListedProcess[] {
  let doc: unknown;
  try {
    doc = JSON.parse(text);
  } catch {
    throw new Error('memlens attach --list-json did not answer JSON');
  }
  const list = (doc as { processes?: unknown })?.processes;
  if (!Array.isArray(list)) {
    throw new Error('memlens attach --list-json did not list processes');
  }
  return list.filter(
    (p): p is ListedProcess =>
      typeof p === 'object' &&
      p !== null &&
      Number.isInteger(p.pid) &&
      Array.isArray(p.command) &&
      p.command.every((a: unknown) => typeof a === 'string') &&
      typeof p.attachable === 'boolean',
  );
}

const baseName = (file: string): string => file.split(/[\\/]/).pop() ?? file;

/** Quick-pick items: attachable processes first; each with its command line. */
export function processPickItems(processes: ListedProcess[]): ProcessPickItem[] {
  const ordered = [...processes.filter((p) => p.attachable), ...processes.filter((p) => !p.attachable)];
  return ordered.map((p) => {
    const [exe = '?', ...rest] = p.command;
    const python = p.python ? `Python ${p.python}` : 'Python';
    return {
      label: `${p.pid}  ${[baseName(exe), ...rest].join(' ')}`.slice(0, 120),
      description: `${python} · ${p.user}`,
      detail: p.attachable ? p.command.join(' ') : `$(circle-slash) ${p.problem ?? 'cannot be attached'}`,
      process: p,
    };
  });
}

/** The arguments of `memlens attach` for `pid`, its run going to the store of `folder`. */
export function attachArgs(pid: number, folder: string): string[] {
  return ['-m', 'memlens', 'attach', String(pid), '--dir', folder, '--no-report'];
}

/** memlens's last one-line message in `lines` ("memlens: …"), without the prefix. */
export function lastMessage(lines: string[]): string | undefined {
  const said = lines.filter((l) => l.startsWith('memlens: '));
  return said.length ? said[said.length - 1].slice('memlens: '.length) : undefined;
}

/**
 * The command: refuses in an untrusted workspace, lists the Python processes, lets the user
 * pick one, attaches with a progress notification until Cancel (or the process ends), then says
 * where the run is. Returns the run's message, or undefined when nothing was attached.
 */
export async function attachToProcess(
  api: VsCodeApi,
  host: AttachHost,
  interpreter: string | undefined,
  folder: string | undefined,
): Promise<string | undefined> {
  if (!mayRunCode(api.isTrusted())) {
    void api.showError(UNTRUSTED_MESSAGE);
    return undefined;
  }
  if (!interpreter) {
    void api.showError('memlens: the server is not running (see the memlens output)');
    return undefined;
  }
  if (!folder) {
    void api.showError('memlens: open a folder first: the run goes to its store (.memlens/runs).');
    return undefined;
  }
  const processes = parseProcessList(await host.output(interpreter, ['-m', 'memlens', 'attach', '--list-json']));
  if (processes.length === 0) {
    await api.showInfo('memlens: no running Python processes found.');
    return undefined;
  }
  const picked = await api.showQuickPick(processPickItems(processes), 'Attach to which Python process? (3.14+)');
  if (!picked) {
    return undefined;
  }
  if (!picked.process.attachable) {
    void api.showError(`memlens: cannot attach to process ${picked.process.pid}: ${picked.process.problem ?? ''}`);
    return undefined;
  }
  const pid = picked.process.pid;
  const lines: string[] = [];
  const code = await host.withProgress(`memlens: attaching to process ${pid}`, async (progress) => {
    const child = host.spawn(interpreter, attachArgs(pid, folder), folder);
    let stopping = false;
    progress.onCancel(() => {
      stopping = true;
      progress.report('detaching: the process writes its run…');
      child.stop();
    });
    child.onLine((line) => {
      lines.push(line);
      if (!stopping && line.startsWith(`memlens: attached to process ${pid}`)) {
        progress.report('attached: tracing what it allocates from now on. Cancel detaches.');
      } else if (line.startsWith('memlens: ') && !stopping) {
        progress.report(line.slice('memlens: '.length));
      }
    });
    return child.exited;
  });
  const said = lastMessage(lines);
  const written = lines.find((l) => l.startsWith('memlens: run written to '));
  if (code !== 0 || !written) {
    void api.showError(`memlens: ${said ?? `memlens attach ended with ${String(code)}`}`);
    return undefined;
  }
  const message = `memlens: ${written.slice('memlens: '.length)} (process ${pid}; what it allocated before attaching is not counted)`;
  void api.showInfo(message);
  return message;
}
