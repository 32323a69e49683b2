// Workspace trust: an untrusted workspace never runs code, but still shows existing runs.
//
// Three gates: the run commands carry `enablement: isWorkspaceTrusted` (package.json) and check
// again here; server commands that run code (the "Run under memlens" code lens calls the
// server's memlens.runFile directly) are refused by the client middleware; and the server is
// never started with an interpreter the workspace chose (the Python extension's pick may be a
// venv inside the workspace), only with the user's memlens.interpreter or python3.

import { RUN_FILE } from './protocol';

export const RUN_COMMANDS = ['memlens.runCurrentFile', 'memlens.runFileWithArgs', 'memlens.attachToProcess'];

/** Server commands that start the user's program. */
export const SERVER_RUN_COMMANDS = [RUN_FILE];

export function mayRunCode(isTrusted: boolean): boolean {
  return isTrusted;
}

/** Whether the client forwards a server command (workspace/executeCommand) in this workspace. */
export function mayExecuteServerCommand(command: string, isTrusted: boolean): boolean {
  return isTrusted || !SERVER_RUN_COMMANDS.includes(command);
}

/** Drops code lenses that would run code when the workspace is untrusted. */
export function filterLenses<T extends { command?: { command: string } }>(lenses: T[], isTrusted: boolean): T[] {
  return isTrusted
    ? lenses
    : lenses.filter(
        (l) => !l.command || (mayExecuteServerCommand(l.command.command, false) && !RUN_COMMANDS.includes(l.command.command)),
      );
}

export const UNTRUSTED_MESSAGE =
  'memlens does not run code in an untrusted workspace. Trust the workspace to run files; existing runs are still shown.';
