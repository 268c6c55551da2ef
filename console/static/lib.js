// Helpers shared by the console's pages: the API client, a DOM builder that
// never parses data as HTML, formatting, sparklines, the confirmation
// dialog and pagination.

export class APIError extends Error {
  constructor(status, body) {
    super(body && body.message ? body.message : `HTTP ${status}`);
    this.status = status;
    this.code = body && body.code ? body.code : 'http_' + status;
  }
}

// api calls the broker's JSON API; a non-2xx answer throws an APIError
// carrying the broker's code and sentence. Every call carries the
// X-Broker-Console header: with http-auth required the broker accepts the
// login's session cookie only with it (another origin cannot send a custom
// header without a CORS preflight, which the broker never answers). A 401
// fires 'broker-unauthorized', and the app shows the login form again.
export async function api(method, path, body) {
  const init = { method, headers: { 'X-Broker-Console': '1' }, credentials: 'same-origin' };
  if (body !== undefined) {
    init.headers['Content-Type'] = 'application/json';
    init.body = JSON.stringify(body);
  }
  const resp = await fetch(path, init);
  if (resp.status === 204) return null;
  let data = null;
  const text = await resp.text();
  if (text) {
    try { data = JSON.parse(text); } catch { data = { message: text }; }
  }
  if (resp.status === 401 && path !== '/v1/auth/login') {
    window.dispatchEvent(new CustomEvent('broker-unauthorized'));
  }
  if (!resp.ok) throw new APIError(resp.status, data);
  return data;
}

// h builds an element: h('td', {class: 'num'}, 'text', child, ...). Strings
// become text nodes; on* attributes become listeners.
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith('on')) el.addEventListener(k.slice(2), v);
    else if (k === 'value') el.value = v;
    else if (k === 'style') el.style.cssText = v; // CSSOM: allowed by the CSP, a style attribute is not
    else if (v === true) el.setAttribute(k, '');
    else el.setAttribute(k, v);
  }
  for (const c of children.flat(Infinity)) {
    if (c === undefined || c === null || c === false) continue;
    el.append(c instanceof Node ? c : document.createTextNode(String(c)));
  }
  return el;
}

// table builds a table from headers (a '#' prefix right-aligns) and rows of cells.
export function table(headers, rows, empty = 'Nothing here.') {
  if (!rows.length) return h('p', { class: 'muted' }, empty);
  const num = headers.map((x) => x.startsWith('#'));
  return h('table', {},
    h('thead', {}, h('tr', {}, headers.map((x, i) => h('th', { class: num[i] ? 'num' : null }, x.replace(/^#/, ''))))),
    h('tbody', {}, rows.map((r) => h('tr', {}, r.map((c, i) => h('td', { class: num[i] ? 'num' : null }, c))))));
}

export function errorBox(err) {
  return h('div', { class: 'error', role: 'alert' }, err.code ? `${err.code}: ${err.message}` : String(err.message || err));
}

export function notice(text) {
  return h('div', { class: 'notice', role: 'status' }, text);
}

export function bytes(n) {
  if (n === undefined || n === null || n < 0) return '–';
  const units = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return `${i ? n.toFixed(1) : n} ${units[i]}`;
}

export function count(n) {
  return n === undefined || n === null ? '–' : Number(n).toLocaleString('en-US');
}

export function duration(ms) {
  if (ms === undefined || ms === null || ms < 0) return '–';
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  if (s < 3600) return `${Math.floor(s / 60)}m ${s % 60}s`;
  if (s < 86400) return `${Math.floor(s / 3600)}h ${Math.floor((s % 3600) / 60)}m`;
  return `${Math.floor(s / 86400)}d ${Math.floor((s % 86400) / 3600)}h`;
}

export function time(ms) {
  return ms === undefined || ms === null || ms < 0 ? '–' : new Date(ms).toISOString().replace('T', ' ').replace('Z', '');
}

// sparkline draws values as an SVG polyline scaled to their range.
export function sparkline(values, id) {
  const ns = 'http://www.w3.org/2000/svg';
  const svg = document.createElementNS(ns, 'svg');
  svg.setAttribute('class', 'spark');
  if (id) svg.setAttribute('id', id);
  svg.setAttribute('viewBox', '0 0 100 30');
  svg.setAttribute('preserveAspectRatio', 'none');
  if (values.length > 1) {
    const lo = Math.min(...values), hi = Math.max(...values);
    const span = hi - lo || 1;
    const pts = values.map((v, i) => `${(i / (values.length - 1)) * 100},${28 - ((v - lo) / span) * 26}`);
    const line = document.createElementNS(ns, 'polyline');
    line.setAttribute('points', pts.join(' '));
    line.setAttribute('vector-effect', 'non-scaling-stroke');
    svg.append(line);
  }
  return svg;
}

// confirmAction opens the confirmation dialog; the user must type word.
// It resolves to true only when they did and pressed Confirm.
export function confirmAction(title, text, word) {
  const dlg = document.getElementById('confirm');
  const input = document.getElementById('confirm-input');
  const ok = document.getElementById('confirm-ok');
  document.getElementById('confirm-title').textContent = title;
  document.getElementById('confirm-text').textContent = text;
  document.getElementById('confirm-word').textContent = word;
  input.value = '';
  ok.disabled = true;
  input.oninput = () => { ok.disabled = input.value !== word; };
  return new Promise((resolve) => {
    dlg.onclose = () => resolve(dlg.returnValue === 'ok' && input.value === word);
    dlg.returnValue = '';
    dlg.showModal();
    input.focus();
  });
}

// b64bytes decodes base64 to bytes (null stays null).
export function b64bytes(s) {
  if (s === null || s === undefined) return null;
  const bin = atob(s);
  const out = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) out[i] = bin.charCodeAt(i);
  return out;
}

const utf8 = new TextDecoder('utf-8', { fatal: true });

// render shows bytes as the chosen format: auto (pretty JSON, else text,
// else hex), text, json, hex or base64.
export function renderBytes(b, format) {
  if (b === null) return h('span', { class: 'muted' }, 'null');
  if (format === 'hex' || format === 'base64') return h('pre', {}, format === 'hex' ? hex(b) : base64(b));
  let text = null;
  try { text = utf8.decode(b); } catch { text = null; }
  if (text === null) return h('pre', { title: 'binary, shown as hex' }, hex(b));
  if (format === 'text') return h('pre', {}, text);
  const t = text.trim();
  if (t.startsWith('{') || t.startsWith('[')) {
    try { return h('pre', { class: 'json' }, JSON.stringify(JSON.parse(t), null, 2)); } catch { /* not JSON */ }
  }
  return h('pre', {}, text);
}

export function hex(b) {
  const parts = [];
  for (let i = 0; i < b.length; i += 16) {
    const row = Array.from(b.slice(i, i + 16), (x) => x.toString(16).padStart(2, '0')).join(' ');
    parts.push(i.toString(16).padStart(6, '0') + '  ' + row);
  }
  return parts.join('\n');
}

function base64(b) {
  let s = '';
  for (const x of b) s += String.fromCharCode(x);
  return btoa(s);
}

// qs builds a query string from the set values of params.
export function qs(params) {
  const u = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) {
    if (v !== undefined && v !== null && v !== '') u.set(k, v);
  }
  const s = u.toString();
  return s ? '?' + s : '';
}

// Pager keeps the cursors of a list with "after" pagination.
export class Pager {
  constructor(reload) { this.stack = []; this.after = ''; this.next = ''; this.reload = reload; }
  controls() {
    return h('div', { class: 'pager' },
      h('button', { class: 'secondary', disabled: !this.stack.length, onclick: () => { this.after = this.stack.pop(); this.reload(); } }, '‹ Previous'),
      h('button', { class: 'secondary', 'data-test': 'next-page', disabled: !this.next, onclick: () => { this.stack.push(this.after); this.after = this.next; this.reload(); } }, 'Next ›'));
  }
}
