import * as assert from 'assert';
import { escapeHtml, momentSpec, readMessage, shownText, timelineHtml } from '../../common/timeline';

describe('timeline view', () => {
  it('escapes what comes from the run and allows only its own script', () => {
    const html = timelineHtml(
      {
        run: { id: '<r1>' },
        svg: '<svg></svg>',
        peak: { t: 1.25, traced_bytes: 2048 },
        top: [{ file: '/w/<img src=x>.py', line: 3, peak_bytes: 3 * 1024 * 1024, text: '"<script>alert(1)</script>' }],
      },
      'abc123',
    );
    assert.ok(html.includes("script-src 'nonce-abc123'"));
    assert.ok(html.includes('&lt;img src=x&gt;.py:3'));
    assert.ok(html.includes('&quot;&lt;script&gt;alert(1)&lt;/script&gt;'));
    assert.ok(html.includes('run &lt;r1&gt; · peak at 1.25 s'));
    assert.strictEqual((html.match(/<script/g) ?? []).length, 1);
    assert.ok(html.includes('<b>3.0 MiB</b>'));
    assert.strictEqual(escapeHtml(`a&'`), 'a&amp;&#39;');
  });
});

describe('timeline control', () => {
  const moment = { kind: 'time' as const, name: '0.25 s', spec: '0.250000s', t: 0.25, traced_bytes: 30 * 1024 * 1024 };
  it('turns a time picked on the chart into a moment spec', () => {
    assert.strictEqual(momentSpec(0.251234567), '0.251235s');
    assert.strictEqual(momentSpec(-1), '0.000000s');
  });
  it('says which moment the editor shows', () => {
    assert.strictEqual(shownText(null), "Shown: the whole run's figures");
    assert.strictEqual(shownText(moment), "Shown: each line's live bytes at 0.25 s (30.0 MiB traced)");
    assert.strictEqual(
      shownText({ ...moment, kind: 'peak', name: 'peak', t: 0.12 }),
      "Shown: each line's live bytes at peak (0.12 s, 30.0 MiB traced)",
    );
  });
  it('reads only the messages it knows', () => {
    assert.deepStrictEqual(readMessage({ open: 2 }), { open: 2 });
    assert.deepStrictEqual(readMessage({ moment: 0.5 }), { moment: 0.5 });
    assert.deepStrictEqual(readMessage({ moment: 'end' }), { moment: 'end' });
    assert.deepStrictEqual(readMessage({ peak: true }), { peak: true });
    assert.deepStrictEqual(readMessage({ clear: true }), { clear: true });
    assert.strictEqual(readMessage({ moment: 'rm -rf' }), undefined);
    assert.strictEqual(readMessage({ moment: Number.NaN }), undefined);
    assert.strictEqual(readMessage('peak'), undefined);
    assert.strictEqual(readMessage(null), undefined);
  });
  it('is a control when the run has moments, and shows the moment shown', () => {
    const base = { run: { id: 'r' }, svg: '<svg data-x0="70" data-x1="690" data-t1="1.0"></svg>', peak: null, top: [] };
    const html = timelineHtml({ ...base, moments: { t: [0.1, 0.2], traced_bytes: [1, 2] }, moment }, 'n');
    assert.ok(html.includes('const TIMES = [0.1,0.2];'));
    assert.ok(html.includes('const CONTROL = true;'));
    assert.ok(html.includes('let shownT = 0.25;'));
    assert.ok(html.includes("Shown: each line&#39;s live bytes at 0.25 s (30.0 MiB traced)"));
    const old = timelineHtml(base, 'n');
    assert.ok(old.includes('const CONTROL = false;'));
    assert.ok(old.includes('This run has no moments'));
    assert.ok(old.includes("Shown: the whole run&#39;s figures"));
  });
});
