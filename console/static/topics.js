// Topics: the list (paginated), one topic (partitions, configs, alter,
// delete) and the message browser.
import { api, h, table, errorBox, notice, bytes, count, time, confirmAction, b64bytes, renderBytes, qs, Pager } from './lib.js';

const enc = encodeURIComponent;

export async function topicsPage(root) {
  root.append(h('h1', {}, 'Topics'));
  const msg = h('div', {});
  const list = h('div', {});
  const prefix = h('input', { placeholder: 'name prefix', 'aria-label': 'prefix' });
  const internal = h('input', { type: 'checkbox' });
  const pager = new Pager(load);
  async function load() {
    try {
      const r = await api('GET', '/v1/admin/topics' + qs({ after: pager.after, limit: 50, prefix: prefix.value, internal: internal.checked ? 'true' : '' }));
      pager.next = r.next || '';
      list.replaceChildren(
        table(['Name', '#Partitions', '#Records', '#Size', 'Owner'], r.topics.map((t) => [
          h('a', { href: `#/topics/${enc(t.name)}` }, t.name), count(t.partitions), count(t.records), bytes(t.bytes),
          t.internal ? h('span', { class: 'tag' }, 'internal') : (t.owner || ''),
        ]), 'No topics.'),
        pager.controls());
    } catch (e) { list.replaceChildren(errorBox(e)); }
  }
  root.append(h('div', { class: 'toolbar' }, prefix, h('label', { class: 'check' }, internal, 'internal topics'),
    h('button', { class: 'secondary', onclick: () => { pager.stack = []; pager.after = ''; load(); } }, 'Filter')));
  root.append(list);

  const name = h('input', { name: 'name', required: true, placeholder: 'orders' });
  const parts = h('input', { name: 'partitions', type: 'number', min: 1, placeholder: 'default' });
  const configs = h('textarea', { name: 'configs', rows: 2, cols: 40, placeholder: 'cleanup.policy=compact\nretention.ms=86400000' });
  const validate = h('input', { type: 'checkbox' });
  root.append(h('h2', {}, 'Create a topic'), msg,
    h('form', { class: 'inline', id: 'create-topic', onsubmit: async (ev) => {
      ev.preventDefault();
      try {
        const body = { name: name.value, partitions: parts.value ? Number(parts.value) : -1, configs: parseConfigs(configs.value), validate_only: validate.checked };
        await api('POST', '/v1/admin/topics', body);
        msg.replaceChildren(notice(validate.checked ? `Topic ${body.name} would be created.` : `Topic ${body.name} created.`));
        load();
      } catch (e) { msg.replaceChildren(errorBox(e)); }
    } },
    h('label', {}, 'Name', name), h('label', {}, 'Partitions', parts), h('label', {}, 'Configs (KEY=VALUE per line)', configs),
    h('label', { class: 'check' }, validate, 'validate only'), h('button', { type: 'submit' }, 'Create')));
  await load();
}

function parseConfigs(text) {
  const out = {};
  for (const line of text.split('\n').map((l) => l.trim()).filter(Boolean)) {
    const i = line.indexOf('=');
    if (i <= 0) throw new Error(`config "${line}" is not KEY=VALUE`);
    out[line.slice(0, i).trim()] = line.slice(i + 1).trim();
  }
  return out;
}

export async function topicPage(root, { arg }) {
  const msg = h('div', {});
  const body = h('div', {});
  root.append(h('h1', {}, 'Topic ', h('code', {}, arg)), msg, body);
  async function load() {
    const t = await api('GET', `/v1/admin/topics/${enc(arg)}`);
    const key = h('input', { name: 'key', placeholder: 'retention.ms', list: 'config-names' });
    const value = h('input', { name: 'value', placeholder: 'value' });
    body.replaceChildren(
      h('p', { class: 'muted' }, `ID ${t.id} · ${count(t.partitions)} partitions · ${count(t.records)} records · ${bytes(t.bytes)}`, t.owner ? ` · owned by ${t.owner}` : ''),
      h('h2', {}, 'Partitions'),
      table(['#Partition', '#Log start', '#High watermark', '#Last stable', '#Records', '#Size', ''], t.partition_list.map((p) => [
        count(p.partition), count(p.log_start_offset), count(p.high_watermark), count(p.last_stable_offset), count(p.records), bytes(p.bytes),
        h('a', { href: `#/browse?topic=${enc(t.name)}&partition=${p.partition}` }, 'browse'),
      ])),
      h('h2', {}, 'Configs'),
      h('datalist', { id: 'config-names' }, t.configs.map((c) => h('option', { value: c.name }))),
      h('form', { class: 'inline', id: 'alter-config', onsubmit: async (ev) => {
        ev.preventDefault();
        try {
          await api('PATCH', `/v1/admin/topics/${enc(arg)}/configs`, { set: { [key.value]: value.value } });
          msg.replaceChildren(notice(`${key.value} set to ${value.value}.`));
          await load();
        } catch (e) { msg.replaceChildren(errorBox(e)); }
      } }, h('label', {}, 'Config', key), h('label', {}, 'Value', value), h('button', { type: 'submit' }, 'Set')),
      table(['Name', 'Value', 'Source', ''], t.configs.map((c) => [
        h('code', {}, c.name), c.value, c.source,
        c.source === 'topic' ? h('button', { class: 'secondary', onclick: async () => {
          try {
            await api('PATCH', `/v1/admin/topics/${enc(arg)}/configs`, { delete: [c.name] });
            msg.replaceChildren(notice(`${c.name} returned to its default.`));
            await load();
          } catch (e) { msg.replaceChildren(errorBox(e)); }
        } }, 'Reset') : '',
      ])),
      h('h2', {}, 'Danger zone'),
      h('button', { class: 'danger', id: 'delete-topic', onclick: async () => {
        if (!await confirmAction('Delete topic', `Delete ${arg} and all its ${count(t.records)} records? This cannot be undone.`, arg)) return;
        try {
          await api('DELETE', `/v1/admin/topics/${enc(arg)}`);
          location.hash = '#/topics';
        } catch (e) { msg.replaceChildren(errorBox(e)); }
      } }, 'Delete topic…'));
  }
  await load();
}

// browsePage reads a page of one partition by offset or time; follow
// polls from the last next_offset and appends what arrived.
export async function browsePage(root, { query, ctx }) {
  root.append(h('h1', {}, 'Messages'));
  const topic = h('input', { name: 'topic', value: query.get('topic') || '', placeholder: 'topic', required: true });
  const partition = h('input', { name: 'partition', type: 'number', min: 0, value: query.get('partition') || '0', style: 'width:6em' });
  const mode = h('select', { name: 'mode' }, h('option', { value: 'offset' }, 'from offset'), h('option', { value: 'timestamp' }, 'from time'), h('option', { value: 'start' }, 'from the start'), h('option', { value: 'end' }, 'latest'));
  const offset = h('input', { name: 'offset', type: 'number', min: 0, value: query.get('offset') || '', placeholder: 'offset', style: 'width:8em' });
  const when = h('input', { name: 'time', type: 'datetime-local', step: 1 });
  const limit = h('select', { name: 'limit' }, [20, 50, 100, 500].map((n) => h('option', { value: n }, String(n))));
  limit.value = '50';
  const format = h('select', { name: 'format' }, ['auto', 'text', 'hex', 'base64'].map((f) => h('option', { value: f }, f)));
  const follow = h('input', { type: 'checkbox', name: 'follow' });
  mode.value = query.get('offset') ? 'offset' : 'start';
  const msg = h('div', {});
  const status = h('p', { class: 'muted' });
  const rowsBody = h('tbody', {});
  const pager = h('div', { class: 'pager' });
  let rows = [];
  let next = null;

  function renderRows() {
    rowsBody.replaceChildren(...rows.map((r) => h('tr', { 'data-offset': r.offset },
      h('td', { class: 'num' }, String(r.offset), r.transactional ? h('div', {}, h('span', { class: 'tag', title: 'written in a transaction (shown whether committed or aborted)' }, 'txn')) : null),
      h('td', {}, time(r.timestamp_ms)),
      h('td', {}, renderBytes(b64bytes(r.key), format.value)),
      h('td', { class: 'value' }, renderBytes(b64bytes(r.value), format.value)),
      h('td', {}, r.headers.length ? h('pre', {}, r.headers.map((x) => {
        const v = b64bytes(x.value);
        let s = '';
        try { s = v === null ? 'null' : new TextDecoder('utf-8', { fatal: true }).decode(v); } catch { s = '0x' + Array.from(v, (b) => b.toString(16).padStart(2, '0')).join(''); }
        return `${x.key}: ${s}`;
      }).join('\n')) : ''))));
  }

  async function fetchPage(params, append) {
    const p = await api('GET', `/v1/admin/topics/${enc(topic.value)}/partitions/${enc(partition.value)}/records` + qs(params));
    rows = append ? rows.concat(p.records) : p.records;
    if (rows.length > 500) rows = rows.slice(rows.length - 500);
    next = p.next_offset;
    status.textContent = `offsets ${p.log_start_offset} to ${p.high_watermark - 1} · showing ${rows.length} · next ${p.next_offset}`;
    renderRows();
    pager.replaceChildren(h('button', { class: 'secondary', disabled: p.next_offset >= p.high_watermark, onclick: () => load({ offset: next }) }, 'Next page ›'));
  }

  async function load(override) {
    msg.replaceChildren();
    try {
      const params = { limit: limit.value };
      if (override) Object.assign(params, override);
      else if (mode.value === 'offset') params.offset = offset.value || 0;
      else if (mode.value === 'timestamp') {
        if (!when.value) throw new Error('choose a time');
        params.timestamp = new Date(when.value + 'Z').getTime();
      } else if (mode.value === 'end') {
        const t = await api('GET', `/v1/admin/topics/${enc(topic.value)}`);
        const p = t.partition_list.find((x) => String(x.partition) === partition.value);
        if (!p) throw new Error(`topic ${topic.value} has no partition ${partition.value}`);
        params.offset = Math.max(p.log_start_offset, p.high_watermark - Number(limit.value));
      }
      await fetchPage(params, false);
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  }

  ctx.every(1000, async () => {
    if (!follow.checked || next === null || !topic.value) return;
    try { await fetchPage({ offset: next, limit: 500 }, true); } catch (e) { msg.replaceChildren(errorBox(e)); }
  });
  format.addEventListener('change', renderRows);

  root.append(
    h('form', { class: 'inline', id: 'browse', onsubmit: (ev) => { ev.preventDefault(); load(); } },
      h('label', {}, 'Topic', topic), h('label', {}, 'Partition', partition), h('label', {}, 'Start', mode), h('label', {}, 'Offset', offset),
      h('label', {}, 'Time (UTC)', when), h('label', {}, 'Limit', limit), h('label', {}, 'Show as', format),
      h('label', { class: 'check' }, follow, 'follow'), h('button', { type: 'submit' }, 'Load')),
    msg, status,
    h('table', { id: 'records' }, h('thead', {}, h('tr', {}, h('th', { class: 'num' }, 'Offset'), h('th', {}, 'Timestamp'), h('th', {}, 'Key'), h('th', {}, 'Value'), h('th', {}, 'Headers'))), rowsBody),
    pager);
  if (topic.value) await load();
}
