// The timeline view (memlens: Show Timeline): a webview with the server's SVG of memory over
// time (memlens.timeline) and the lines that held most at the peak, each a link to its line.
import { formatBytes } from './status';

export interface TimelineTop {
  file: string;
  line: number;
  peak_bytes: number;
  text: string;
}

export interface TimelineResult {
  run: { id: string } | null;
  svg: string;
  peak: { t: number; traced_bytes: number } | null;
  top: TimelineTop[];
}

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/**
 * The page. The SVG comes from the server, which escapes everything it takes from the run;
 * the list is escaped here. Scripts run only with `nonce` (the link handler); nothing loads
 * from anywhere (`default-src 'none'`).
 */
export function timelineHtml(result: TimelineResult, nonce: string): string {
  const rows = result.top
    .map(
      (t, i) =>
        `<li><a href="#" data-index="${i}">${escapeHtml(t.file.split(/[\\/]/).pop() ?? t.file)}:${t.line}</a>` +
        ` <b>${escapeHtml(formatBytes(t.peak_bytes))}</b> <code>${escapeHtml(t.text)}</code></li>`,
    )
    .join('\n');
  const peak = result.peak ? `peak at ${result.peak.t.toFixed(2)} s` : 'no timeline in this run';
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-${nonce}';">
<style>body{font-family:var(--vscode-font-family);color:var(--vscode-foreground)} li{margin:.3em 0} code{opacity:.8}</style>
</head><body>
<h3>Memory over time · run ${escapeHtml(result.run?.id ?? '')} · ${escapeHtml(peak)}</h3>
${result.svg}
<h4>Held most at the peak</h4>
<ol id="top">${rows}</ol>
<script nonce="${nonce}">
const vscode = acquireVsCodeApi();
document.getElementById('top').addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (a) { e.preventDefault(); vscode.postMessage({ open: Number(a.dataset.index) }); }
});
</script>
</body></html>`;
}
