// The memlens server's custom LSP method and command names, as the server defines them
// (server/memlens_lsp/protocol.py) and docs/lsp.md documents them. The rest of the client
// uses these constants, never the strings: tests/unit/test_protocol_names.py checks the three.

/** Notification server -> client: which run and baseline a workspace folder shows. */
export const RUN_LOADED = 'memlens/runLoaded';

// Commands (workspace/executeCommand).
export const RUN_FILE = 'memlens.runFile';
export const SET_BASELINE = 'memlens.setBaseline';
export const CLEAR_BASELINE = 'memlens.clearBaseline';
export const CHOOSE_RUN = 'memlens.chooseRun';
export const LIST_RUNS = 'memlens.listRuns';
export const SUMMARY = 'memlens.summary';
export const TIMELINE = 'memlens.timeline';
export const LINE_CHANGES = 'memlens.lineChanges';
export const SET_MOMENT = 'memlens.setMoment';
export const JUMP_TO_PEAK = 'memlens.jumpToPeak';
export const DOCUMENT_RUN = 'memlens.documentRun';
