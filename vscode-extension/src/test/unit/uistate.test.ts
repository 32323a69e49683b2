import * as assert from 'assert';
import { readSettings } from '../../common/settings';
import { applyUi, overlay, StateStore, toggleUi, uiValue } from '../../common/uistate';

function memento(): StateStore & { data: Map<string, unknown> } {
  const data = new Map<string, unknown>();
  return {
    data,
    get: <T>(key: string) => data.get(key) as T | undefined,
    update: (key: string, value: unknown) => {
      data.set(key, value);
      return Promise.resolve();
    },
  };
}

describe('UI state', () => {
  it('toggles in the workspace state, the setting being the default', async () => {
    const store = memento();
    assert.strictEqual(uiValue(store, 'compareWithBaseline', false), false);
    assert.strictEqual(await toggleUi(store, 'compareWithBaseline', false), true);
    assert.deepStrictEqual([...store.data.entries()], [['memlens.ui.compareWithBaseline', true]]);
    assert.strictEqual(uiValue(store, 'compareWithBaseline', false), true);
    assert.strictEqual(await toggleUi(store, 'inlayHints.enabled', true), false);
  });
  it('applies the toggles to what the server is sent', async () => {
    const store = memento();
    await toggleUi(store, 'compareWithBaseline', false);
    await toggleUi(store, 'inlayHints.enabled', true);
    const settings = applyUi(readSettings(<T>(_k: string, fallback: T) => fallback), store);
    assert.strictEqual(settings.compareWithBaseline, true);
    assert.strictEqual(settings.inlayHints.enabled, false);
    assert.strictEqual(settings.inlayHints.figure, 'peak');
    assert.deepStrictEqual(overlay({ inlayHints: { figure: 'alloc', enabled: true }, compareWithBaseline: false }, store), {
      inlayHints: { figure: 'alloc', enabled: false },
      compareWithBaseline: true,
    });
    assert.strictEqual(overlay(null, store), null);
  });
});
