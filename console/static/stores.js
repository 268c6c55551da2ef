// Event stores: the list, one store (read forward or backward by position,
// follow), and one stream (read forward or backward by revision).
import { api, h, table, errorBox, count, time, qs, Pager } from './lib.js';

const enc = encodeURIComponent;

export async function storesPage(root, { ctx }) {
  root.append(h('h1', {}, 'Event stores'));
  const list = h('div', {});
  root.append(list);
  ctx.every(5000, async () => {
    try {
      const r = await api('GET', '/v1/stores');
      list.replaceChildren(table(['Store', '#Streams', '#First position', '#Next position', 'Created'], r.stores.map((s) => [
        h('a', { href: `#/stores/${enc(s.name)}` }, s.name), count(s.streams), count(s.first_position), count(s.next_position), time(s.created_ms),
      ]), 'No event stores.'));
    } catch (e) { list.replaceChildren(errorBox(e)); }
  });
}

function eventRows(events) {
  return table(['#Position', 'Stream', '#Revision', 'Type', 'Time', 'Data'], events.map((e) => [
    count(e.position), e.stream, e.revision === null ? '–' : count(e.revision), e.type, e.timestamp,
    h('pre', {}, e.data !== undefined ? JSON.stringify(e.data, null, 2) : (e.data_base64 ? `(base64) ${e.data_base64}` : '')),
  ]), 'No events.');
}

export async function storePage(root, { arg, ctx }) {
  const st = await api('GET', `/v1/stores/${enc(arg)}`);
  root.append(h('h1', {}, 'Event store ', h('code', {}, arg)),
    h('p', { class: 'muted' }, `${count(st.streams)} streams · positions ${st.first_position} to ${st.next_position - 1}`));

  // The whole store, by position.
  const dir = h('select', { name: 'direction' }, h('option', { value: 'backward' }, 'newest first'), h('option', { value: 'forward' }, 'oldest first'));
  const from = h('input', { name: 'from', type: 'number', min: 0, placeholder: 'position' });
  const follow = h('input', { type: 'checkbox', name: 'follow' });
  const out = h('div', { id: 'store-events' });
  const msg = h('div', {});
  const limit = 50;
  let events = [];
  let next = null;
  async function read() {
    msg.replaceChildren();
    try {
      const s = await api('GET', `/v1/stores/${enc(arg)}`);
      let start = from.value !== '' ? Number(from.value) : s.first_position;
      if (dir.value === 'backward' && from.value === '') start = Math.max(s.first_position, s.next_position - limit);
      if (start >= s.next_position) { events = []; next = s.next_position; out.replaceChildren(eventRows([])); return; }
      const p = await api('GET', `/v1/stores/${enc(arg)}/events` + qs({ from: start, limit }));
      events = p.events;
      next = p.next_position;
      out.replaceChildren(eventRows(dir.value === 'backward' ? [...events].reverse() : events));
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }
  ctx.every(1000, async () => {
    if (!follow.checked || next === null) return;
    const s = await api('GET', `/v1/stores/${enc(arg)}`);
    if (next >= s.next_position) return;
    const p = await api('GET', `/v1/stores/${enc(arg)}/events` + qs({ from: next, limit: 500 }));
    events = events.concat(p.events).slice(-500);
    next = p.next_position;
    out.replaceChildren(eventRows(dir.value === 'backward' ? [...events].reverse() : events));
  });
  root.append(h('h2', {}, 'Events'),
    h('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); read(); } },
      h('label', {}, 'Order', dir), h('label', {}, 'From position', from), h('label', { class: 'check' }, follow, 'follow'), h('button', { type: 'submit' }, 'Read')),
    msg, out);
  await read();

  // The store's streams, by name, paginated.
  const streamList = h('div', { id: 'stream-list' });
  const streamPrefix = h('input', { name: 'stream_prefix', placeholder: 'name prefix' });
  const streamPager = new Pager(listStreams);
  async function listStreams() {
    try {
      const r = await api('GET', `/v1/stores/${enc(arg)}/streams` + qs({ after: streamPager.after, prefix: streamPrefix.value, limit: 20 }));
      streamPager.next = r.next || '';
      streamList.replaceChildren(table(['Stream', 'State', '#First revision', '#Head revision', '#Head position', ''], r.streams.map((x) => [
        h('code', {}, x.stream), x.state, count(x.first_revision), count(x.head_revision), x.head_position === undefined ? '–' : count(x.head_position),
        h('button', { class: 'secondary', onclick: () => { stream.value = x.stream; sfrom.value = ''; readStream(); } }, 'read'),
      ]), 'No streams.'), streamPager.controls());
    } catch (e) { streamList.replaceChildren(errorBox(e)); }
  }
  root.append(h('h2', {}, 'Streams'),
    h('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); streamPager.stack = []; streamPager.after = ''; listStreams(); } },
      h('label', {}, 'Prefix', streamPrefix), h('button', { type: 'submit', class: 'secondary' }, 'Filter')),
    streamList);

  // One stream, by revision.
  const stream = h('input', { name: 'stream', placeholder: 'stream name', required: true });
  const sdir = h('select', { name: 'stream_direction' }, h('option', { value: 'forward' }, 'forward'), h('option', { value: 'backward' }, 'backward'));
  const sfrom = h('input', { name: 'from_revision', placeholder: 'start / end / revision' });
  const sout = h('div', { id: 'stream-events' });
  const smore = h('div', { class: 'pager' });
  async function readStream(fromRev) {
    try {
      const info = await api('GET', `/v1/stores/${enc(arg)}/streams/${enc(stream.value)}`);
      const p = await api('GET', `/v1/stores/${enc(arg)}/streams/${enc(stream.value)}/events` + qs({
        direction: sdir.value, limit, from_revision: fromRev !== undefined ? fromRev : (sfrom.value || (sdir.value === 'backward' ? 'end' : '')) }));
      sout.replaceChildren(h('p', { class: 'muted' }, `${info.state} · revisions ${info.first_revision} to ${info.head_revision}`), eventRows(p.events));
      smore.replaceChildren(p.end_of_stream ? '' : h('button', { class: 'secondary', onclick: () => readStream(p.next_revision) }, 'Next page ›'));
    } catch (e) { sout.replaceChildren(errorBox(e)); smore.replaceChildren(); }
  }
  root.append(h('h2', {}, 'Stream'),
    h('form', { class: 'inline', onsubmit: (ev) => { ev.preventDefault(); readStream(); } },
      h('label', {}, 'Stream', stream), h('label', {}, 'Direction', sdir), h('label', {}, 'From revision', sfrom), h('button', { type: 'submit' }, 'Read stream')),
    sout, smore);
  await listStreams();
}
