import * as assert from 'assert';
import * as sinon from 'sinon';
import {
  AttachChild,
  AttachHost,
  attachArgs,
  attachToProcess,
  lastMessage,
  ListedProcess,
  parseProcessList,
  processPickItems,
  Progress,
} from '../../common/attach';
import { VsCodeApi } from '../../common/vscodeapi';

type Fake = VsCodeApi & { [K in keyof VsCodeApi]: sinon.SinonStub };

function fakeApi(overrides: Partial<VsCodeApi> = {}): Fake {
  const api = {
    getSetting: sinon.stub().callsFake((_k: string, fallback: unknown) => fallback),
    updateSetting: sinon.stub().resolves(),
    isTrusted: sinon.stub().returns(true),
    showError: sinon.stub().resolves(undefined),
    showInfo: sinon.stub().resolves(undefined),
    showQuickPick: sinon.stub().callsFake((items: { process: ListedProcess }[]) => Promise.resolve(items[0])),
    showInputBox: sinon.stub().resolves(undefined),
    activePythonFile: sinon.stub().returns(undefined),
    copyToClipboard: sinon.stub().resolves(),
    activeWorkspaceFolder: sinon.stub().returns(undefined),
    openLocation: sinon.stub().resolves(),
    ...overrides,
  };
  return api as unknown as Fake;
}

const SERVICE: ListedProcess = {
  pid: 4242,
  command: ['/usr/bin/python3.14', 'service.py', '--port', '8000'],
  user: 'ann',
  python: '3.14',
  attachable: true,
  problem: null,
};
const OLD: ListedProcess = {
  pid: 17,
  command: ['/usr/bin/python3.11', 'old.py'],
  user: 'ann',
  python: '3.11',
  attachable: false,
  problem: 'attaching needs Python 3.14 or newer: process 17 runs Python 3.11',
};

/** A memlens attach that says `lines`, then ends with `code` when stopped (or at once). */
class FakeChild implements AttachChild {
  private listeners: ((line: string) => void)[] = [];
  private end!: (code: number | null) => void;
  stopped = false;
  exited = new Promise<number | null>((resolve) => (this.end = resolve));
  constructor(private readonly lines: string[], private readonly after: string[], private readonly code: number, untilStopped: boolean) {
    setImmediate(() => {
      this.lines.forEach((l) => this.listeners.forEach((f) => f(l)));
      if (!untilStopped) {
        this.finish();
      }
    });
  }
  onLine(listener: (line: string) => void): void {
    this.listeners.push(listener);
  }
  stop(): void {
    this.stopped = true;
    setImmediate(() => this.finish());
  }
  private finish(): void {
    this.after.forEach((l) => this.listeners.forEach((f) => f(l)));
    this.end(this.code);
  }
}

function fakeHost(child: FakeChild, list: ListedProcess[] = [OLD, SERVICE], cancel = false) {
  const reports: string[] = [];
  const spawned: { interpreter: string; args: string[]; cwd: string }[] = [];
  const host: AttachHost = {
    output: sinon.stub().resolves(JSON.stringify({ processes: list })),
    spawn: (interpreter, args, cwd) => {
      spawned.push({ interpreter, args, cwd });
      return child;
    },
    withProgress: <T>(_title: string, task: (progress: Progress) => Promise<T>) => {
      let onCancel: (() => void) | undefined;
      // The user cancels once the attachment is reported (a timer raced the attachment on a
      // loaded machine: the cancel came first).
      const report = (m: string): void => {
        reports.push(m);
        if (cancel && m.startsWith('attached')) {
          setImmediate(() => onCancel?.());
        }
      };
      return task({ report, onCancel: (l) => (onCancel = l) });
    },
  };
  return { host, reports, spawned };
}

const ATTACHED = 'memlens: attached to process 4242 (/usr/bin/python3.14 service.py --port 8000): tracing every allocation until Ctrl-C';
const WRITTEN = ['memlens: detached from process 4242 after 3.1 s', 'memlens: run written to .memlens/runs/20261126-101010-4242.mlrun'];

describe('attach', () => {
  it('reads the process list, leaving out entries of the wrong shape', () => {
    const text = JSON.stringify({ processes: [SERVICE, { pid: 'x' }, { ...OLD, command: [1] }, OLD] });
    assert.deepStrictEqual(parseProcessList(text), [SERVICE, OLD]);
    assert.throws(() => parseProcessList('not json'), /did not answer JSON/);
    assert.throws(() => parseProcessList('{"nope": 1}'), /did not list processes/);
  });
  it('lists attachable processes first, each with its command line or why not', () => {
    const items = processPickItems([OLD, SERVICE]);
    assert.deepStrictEqual(
      items.map((i) => [i.label, i.description, i.detail]),
      [
        ['4242  python3.14 service.py --port 8000', 'Python 3.14 · ann', '/usr/bin/python3.14 service.py --port 8000'],
        ['17  python3.11 old.py', 'Python 3.11 · ann', '$(circle-slash) attaching needs Python 3.14 or newer: process 17 runs Python 3.11'],
      ],
    );
  });
  it('runs memlens attach into the store of the folder, without its report', () => {
    assert.deepStrictEqual(attachArgs(4242, '/w'), ['-m', 'memlens', 'attach', '4242', '--dir', '/w', '--no-report']);
    assert.strictEqual(lastMessage(['x', 'memlens: a', 'memlens: b', 'y']), 'b');
    assert.strictEqual(lastMessage(['x']), undefined);
  });
  it('never attaches in an untrusted workspace', async () => {
    const api = fakeApi({ isTrusted: sinon.stub().returns(false) });
    const { host, spawned } = fakeHost(new FakeChild([], [], 0, false));
    assert.strictEqual(await attachToProcess(api, host, '/py', '/w'), undefined);
    assert.match(String(api.showError.firstCall.args[0]), /untrusted workspace/);
    assert.deepStrictEqual(spawned, []);
  });
  it('attaches until Cancel, which detaches; then says where the run is', async () => {
    const api = fakeApi();
    const child = new FakeChild([ATTACHED], WRITTEN, 0, true);
    const { host, reports, spawned } = fakeHost(child, [OLD, SERVICE], true);
    const message = await attachToProcess(api, host, '/venv/bin/python', '/w');
    assert.deepStrictEqual(spawned, [{ interpreter: '/venv/bin/python', args: attachArgs(4242, '/w'), cwd: '/w' }]);
    assert.strictEqual(child.stopped, true);
    assert.deepStrictEqual(reports, [
      'attached: tracing what it allocates from now on. Cancel detaches.',
      'detaching: the process writes its run…',
    ]);
    assert.strictEqual(
      message,
      'memlens: run written to .memlens/runs/20261126-101010-4242.mlrun (process 4242; what it allocated before attaching is not counted)',
    );
    assert.strictEqual(api.showInfo.firstCall.args[0], message);
    assert.strictEqual(api.showError.called, false);
  });
  it('shows memlens attach\'s one-line refusal', async () => {
    const api = fakeApi();
    const refusal = 'memlens: cannot attach to process 4242: process 4242 has remote debugging turned off (-X disable-remote-debug)';
    const { host } = fakeHost(new FakeChild([refusal], [], 2, false));
    assert.strictEqual(await attachToProcess(api, host, '/py', '/w'), undefined);
    assert.strictEqual(api.showError.firstCall.args[0], refusal);
  });
  it('refuses a process the list says cannot be attached, without running anything', async () => {
    const api = fakeApi({ showQuickPick: sinon.stub().callsFake((items: { process: ListedProcess }[]) => Promise.resolve(items[1])) });
    const { host, spawned } = fakeHost(new FakeChild([], [], 0, false));
    assert.strictEqual(await attachToProcess(api, host, '/py', '/w'), undefined);
    assert.strictEqual(api.showError.firstCall.args[0], `memlens: cannot attach to process 17: ${OLD.problem}`);
    assert.deepStrictEqual(spawned, []);
  });
  it('says so when there is no Python process, and does nothing when the pick is dismissed', async () => {
    const api = fakeApi();
    const { host } = fakeHost(new FakeChild([], [], 0, false), []);
    assert.strictEqual(await attachToProcess(api, host, '/py', '/w'), undefined);
    assert.strictEqual(api.showInfo.firstCall.args[0], 'memlens: no running Python processes found.');
    const dismissed = fakeApi({ showQuickPick: sinon.stub().resolves(undefined) });
    const second = fakeHost(new FakeChild([], [], 0, false));
    assert.strictEqual(await attachToProcess(dismissed, second.host, '/py', '/w'), undefined);
    assert.deepStrictEqual(second.spawned, []);
  });
});
