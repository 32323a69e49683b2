import * as assert from 'assert';
import { escapeHtml, timelineHtml } from '../../common/timeline';

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
