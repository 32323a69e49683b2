// UI state (Compare With Baseline, Toggle Annotations) lives in the extension's workspace
// state, never in the project's .vscode/settings.json. The settings of the same names stay the
// defaults; a toggle overrides them for this workspace. The server learns the effective values
// through the settings it is sent: initializationOptions and the answers to
// workspace/configuration pass through `overlay`.
import { ServerSettings } from './settings';

/** The slice of vscode.Memento used here (context.workspaceState). */
export interface StateStore {
  get<T>(key: string): T | undefined;
  update(key: string, value: unknown): Thenable<void>;
}

/** Toggles of the UI, by the setting key (without `memlens.`) they override. */
export const UI_TOGGLES = ['compareWithBaseline', 'inlayHints.enabled'] as const;
export type UiToggle = (typeof UI_TOGGLES)[number];

const stateKey = (key: UiToggle): string => `memlens.ui.${key}`;

/** The effective value of a toggle: the workspace state when set, else the setting. */
export function uiValue(store: StateStore, key: UiToggle, setting: boolean): boolean {
  const value = store.get<boolean>(stateKey(key));
  return typeof value === 'boolean' ? value : setting;
}

/** Flips a toggle in the workspace state; returns its new value. */
export async function toggleUi(store: StateStore, key: UiToggle, setting: boolean): Promise<boolean> {
  const next = !uiValue(store, key, setting);
  await store.update(stateKey(key), next);
  return next;
}

/** Server settings with the toggles applied. */
export function applyUi(settings: ServerSettings, store: StateStore): ServerSettings {
  return {
    ...settings,
    compareWithBaseline: uiValue(store, 'compareWithBaseline', settings.compareWithBaseline),
    inlayHints: { ...settings.inlayHints, enabled: uiValue(store, 'inlayHints.enabled', settings.inlayHints.enabled) },
  };
}

/** A `memlens` section as VS Code answers workspace/configuration, with the toggles applied. */
export function overlay(section: unknown, store: StateStore): unknown {
  if (section === null || typeof section !== 'object' || Array.isArray(section)) {
    return section;
  }
  const raw = section as Record<string, unknown>;
  const hints = raw.inlayHints && typeof raw.inlayHints === 'object' ? (raw.inlayHints as Record<string, unknown>) : {};
  const compareSetting = typeof raw.compareWithBaseline === 'boolean' ? raw.compareWithBaseline : false;
  const enabledSetting = typeof hints.enabled === 'boolean' ? hints.enabled : true;
  return {
    ...raw,
    compareWithBaseline: uiValue(store, 'compareWithBaseline', compareSetting),
    inlayHints: { ...hints, enabled: uiValue(store, 'inlayHints.enabled', enabledSetting) },
  };
}
