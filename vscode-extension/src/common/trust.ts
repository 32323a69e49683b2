// Workspace trust: an untrusted workspace never runs code, but still shows existing runs.

export const RUN_COMMANDS = ['memlens.runCurrentFile', 'memlens.runFileWithArgs'];

export function mayRunCode(isTrusted: boolean): boolean {
  return isTrusted;
}

export const UNTRUSTED_MESSAGE =
  'memlens does not run code in an untrusted workspace. Trust the workspace to run files; existing runs are still shown.';
