// The timeline view (memlens: Show Timeline): a webview with the server's SVG of memory over
// time (memlens.timeline) that works as a control: clicking or dragging on it picks a moment of
// the run, and the editor's hints, hovers and lenses show each line's live bytes then
// (memlens.setMoment). Beside it, the lines that held most at the peak, each a link to its line.
import { formatBytes, MomentInfo, momentText } from './status';

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
  /** When the run's peak happened (seconds), when known. */
  peak_at_s?: number | null;
  duration_s?: number;
  /** The run's moments: their times (seconds) and what was traced then. */
  moments?: { t: number[]; traced_bytes: number[] };
  /** The moment shown now, or null. */
  moment?: MomentInfo | null;
}

/** What the page asks of the extension. */
export type TimelineMessage = { open: number } | { moment: number | string } | { peak: true } | { clear: true };

export function escapeHtml(text: string): string {
  return text
    .replace(/&/g, '&amp;')
    .replace(/</g, '&lt;')
    .replace(/>/g, '&gt;')
    .replace(/"/g, '&quot;')
    .replace(/'/g, '&#39;');
}

/** The moment spec of a time picked on the chart (seconds): `0.251234s`. */
export function momentSpec(t: number): string {
  return `${Math.max(0, t).toFixed(6)}s`;
}

/** "Shown: …": which moment the editor shows. */
export function shownText(moment: MomentInfo | null | undefined): string {
  return moment ? `Shown: each line's live bytes at ${momentText(moment)}` : "Shown: the whole run's figures";
}

/** A message from the page, checked (the page is ours, but it is a separate context). */
export function readMessage(msg: unknown): TimelineMessage | undefined {
  if (typeof msg !== 'object' || msg === null) {
    return undefined;
  }
  const m = msg as Record<string, unknown>;
  if (typeof m.open === 'number') {
    return { open: m.open };
  }
  if ((typeof m.moment === 'number' && Number.isFinite(m.moment)) || m.moment === 'end') {
    return { moment: m.moment };
  }
  if (m.peak === true) {
    return { peak: true };
  }
  if (m.clear === true) {
    return { clear: true };
  }
  return undefined;
}

/**
 * The page. The SVG comes from the server, which escapes everything it takes from the run;
 * the list is escaped here. Scripts run only with `nonce` (the chart's control and the links);
 * nothing loads from anywhere (`default-src 'none'`). The SVG carries where time runs in it
 * (`data-x0`, `data-x1`: the plot's left and right edges; `data-t1`: the time at the right).
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
  const times = (result.moments?.t ?? []).filter((t) => Number.isFinite(t));
  const control = times.length > 0;
  const help = control
    ? 'Click or drag on the chart (or use ← →) to see each line at that moment in the editor.'
    : 'This run has no moments (an older or imported run): the editor shows its peak and end only.';
  return `<!DOCTYPE html>
<html><head><meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="default-src 'none'; style-src 'unsafe-inline'; script-src 'nonce-${nonce}';">
<style>body{font-family:var(--vscode-font-family);color:var(--vscode-foreground)} li{margin:.3em 0} code{opacity:.8}
#plot svg{max-width:100%;height:auto;cursor:crosshair;touch-action:none} .bar{margin:.5em 0;display:flex;gap:.5em;align-items:center}
button{color:var(--vscode-button-foreground);background:var(--vscode-button-background);border:none;padding:.3em .8em;cursor:pointer}
#shown{opacity:.9} .help{opacity:.7;font-size:90%}</style>
</head><body>
<h3>Memory over time · run ${escapeHtml(result.run?.id ?? '')} · ${escapeHtml(peak)}</h3>
<div id="plot" tabindex="0">${result.svg}</div>
<div class="bar"><button id="peak">Jump to Peak</button><button id="end">End</button><button id="clear">Whole run</button>
<span id="shown">${escapeHtml(shownText(result.moment))}</span></div>
<div class="help">${escapeHtml(help)}</div>
<h4>Held most at the peak</h4>
<ol id="top">${rows}</ol>
<script nonce="${nonce}">
const vscode = acquireVsCodeApi();
const TIMES = ${JSON.stringify(times)};
const CONTROL = ${control ? 'true' : 'false'};
let shownT = ${result.moment && typeof result.moment.t === 'number' ? JSON.stringify(result.moment.t) : 'null'};
document.getElementById('top').addEventListener('click', (e) => {
  const a = e.target.closest('a');
  if (a) { e.preventDefault(); vscode.postMessage({ open: Number(a.dataset.index) }); }
});
document.getElementById('peak').addEventListener('click', () => vscode.postMessage({ peak: true }));
document.getElementById('end').addEventListener('click', () => vscode.postMessage({ moment: 'end' }));
document.getElementById('clear').addEventListener('click', () => vscode.postMessage({ clear: true }));
const plot = document.getElementById('plot');
const svg = plot.querySelector('svg');
const x0 = Number(svg && svg.dataset.x0), x1 = Number(svg && svg.dataset.x1), t1 = Number(svg && svg.dataset.t1);
const usable = CONTROL && svg && x1 > x0 && t1 > 0;
let cursor = null;
if (usable) {
  const box = svg.viewBox.baseVal;
  cursor = document.createElementNS('http://www.w3.org/2000/svg', 'line');
  cursor.setAttribute('id', 'moment-cursor');
  cursor.setAttribute('y1', '16');
  cursor.setAttribute('y2', String(box.height - 30));
  cursor.setAttribute('stroke', '#e5c07b');
  cursor.setAttribute('stroke-width', '2');
  cursor.style.visibility = 'hidden';
  svg.appendChild(cursor);
  const timeAt = (ev) => {
    const r = svg.getBoundingClientRect();
    const x = (ev.clientX - r.left) * box.width / r.width;
    return Math.min(t1, Math.max(0, (x - x0) / (x1 - x0) * t1));
  };
  let dragging = false, timer = null;
  const send = (t) => { clearTimeout(timer); vscode.postMessage({ moment: t }); };
  svg.addEventListener('pointerdown', (e) => { dragging = true; svg.setPointerCapture(e.pointerId); const t = timeAt(e); place(t); send(t); });
  svg.addEventListener('pointermove', (e) => {
    if (!dragging) return;
    const t = timeAt(e); place(t); clearTimeout(timer); timer = setTimeout(() => send(t), 120);
  });
  svg.addEventListener('pointerup', (e) => { if (dragging) { dragging = false; send(timeAt(e)); } });
  plot.addEventListener('keydown', (e) => {
    if (e.key !== 'ArrowLeft' && e.key !== 'ArrowRight') return;
    e.preventDefault();
    const now = shownT === null ? (e.key === 'ArrowLeft' ? t1 : -1) : shownT;
    const next = e.key === 'ArrowLeft' ? [...TIMES].reverse().find((t) => t < now - 1e-9) : TIMES.find((t) => t > now + 1e-9);
    if (next !== undefined) { place(next); send(next); }
  });
}
function place(t) {
  if (!cursor) return;
  const x = x0 + (t / t1) * (x1 - x0);
  cursor.setAttribute('x1', String(x));
  cursor.setAttribute('x2', String(x));
  cursor.style.visibility = 'visible';
}
if (shownT !== null) place(shownT);
window.addEventListener('message', (e) => {
  const data = e.data || {};
  if (!('shown' in data)) return;
  document.getElementById('shown').textContent = data.text;
  shownT = data.shown && typeof data.shown.t === 'number' ? data.shown.t : null;
  if (shownT === null) { if (cursor) cursor.style.visibility = 'hidden'; } else { place(shownT); }
});
</script>
</body></html>`;
}
