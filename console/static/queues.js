// Native queues: the list with depth and rates, one queue (stats, its
// dead-letter queue with reasons, redrive at a rate with a confirmation).
import { api, h, table, errorBox, notice, count, duration, confirmAction, qs, Pager } from './lib.js';

const enc = encodeURIComponent;

export async function queuesPage(root, { ctx }) {
  root.append(h('h1', {}, 'Queues'));
  const list = h('div', {});
  const pager = new Pager(load);
  async function load() {
    try {
      const r = await api('GET', '/v1/queues' + qs({ after: pager.after, limit: 50 }));
      pager.next = r.next && r.queues.length === 50 ? r.next : '';
      const stats = await Promise.all(r.queues.map((q) => api('GET', `/v1/queues/${enc(q.name)}/stats`).catch(() => null)));
      list.replaceChildren(table(['Queue', 'Kind', '#Available', '#In flight', '#Delayed', 'Oldest', '#Dead letters', '#Sent/s', '#Acked/s'], r.queues.map((q, i) => {
        const s = stats[i] || {};
        const rates = s.rates_per_sec || {};
        return [h('a', { href: `#/queues/${enc(q.name)}` }, q.name), q.kind, count(s.available), count(s.inflight), count(s.delayed),
          duration(s.oldest_age_ms), q.kind === 'dlq' ? '–' : count(s.dead_letter_depth), (rates.sent || 0).toFixed(1), (rates.acked || 0).toFixed(1)];
      }), 'No queues.'), pager.controls());
    } catch (e) { list.replaceChildren(errorBox(e)); }
  }
  root.append(list);
  ctx.every(3000, load);
}

export async function queuePage(root, { arg, ctx }) {
  root.append(h('h1', {}, 'Queue ', h('code', {}, arg)));
  const statsBox = h('div', {});
  root.append(statsBox);
  let info = null;
  async function loadStats() {
    try {
      const s = await api('GET', `/v1/queues/${enc(arg)}/stats`);
      const t = s.totals || {};
      const r = s.rates_per_sec || {};
      statsBox.replaceChildren(h('div', { class: 'cards', id: 'queue-stats' },
        ...[['Available', count(s.available)], ['Ready', count(s.ready)], ['In flight', count(s.inflight)], ['Delayed', count(s.delayed)],
          ['Oldest', duration(s.oldest_age_ms)], ['Dead letters', s.kind === 'dlq' ? '–' : count(s.dead_letter_depth)],
          ['Sent / s', (r.sent || 0).toFixed(1)], ['Received / s', (r.received || 0).toFixed(1)], ['Acked / s', (r.acked || 0).toFixed(1)],
          ['Sent total', count(t.sent)], ['Acked total', count(t.acked)], ['Redriven', count(t.redriven)]]
          .map(([l, v]) => h('div', { class: 'card' }, h('div', { class: 'label' }, l), h('div', { class: 'value', 'data-stat': l }, v)))));
    } catch (e) { statsBox.replaceChildren(errorBox(e)); }
  }
  info = await api('GET', `/v1/queues/${enc(arg)}`);
  await loadStats();
  ctx.every(2000, loadStats);
  // Purge (as `broker queue purge` / `broker dlq purge`): every message,
  // or those in the chosen states, after a typed confirmation.
  const purgeMsg = h('div', {});
  const purgeStates = h('select', { name: 'purge_states' }, [['', 'every state'], ['ready', 'ready'], ['delayed', 'delayed'], ['ready,delayed', 'ready and delayed']].map(([v, l]) => h('option', { value: v }, l)));
  root.append(h('h2', {}, 'Purge'),
    h('form', { class: 'inline', id: 'purge', onsubmit: async (ev) => {
      ev.preventDefault();
      if (!await confirmAction('Purge', `Delete ${purgeStates.value ? 'the ' + purgeStates.value + ' messages' : 'every message'} of ${arg}? This cannot be undone.`, arg)) return;
      try {
        const body = purgeStates.value ? { states: purgeStates.value.split(',') } : {};
        const r = await api('POST', `/v1/queues/${enc(arg)}/purge`, body);
        purgeMsg.replaceChildren(notice(`${r.deleted} messages deleted.`));
        await loadStats();
      } catch (e) { purgeMsg.replaceChildren(errorBox(e)); }
    } }, h('label', {}, 'Messages', purgeStates), h('button', { type: 'submit', class: 'danger' }, 'Purge…')), purgeMsg);

  const dlq = info.kind === 'dlq' ? info.name : info.dead_letter_queue;
  if (!dlq) {
    root.append(h('p', { class: 'muted' }, 'This queue has no dead-letter queue.'));
    return;
  }

  const reason = h('select', { name: 'reason' }, ['', 'max_receives', 'max_expiries', 'rejected', 'expired'].map((x) => h('option', { value: x }, x || 'any reason')));
  const list = h('div', { id: 'dlq-list' });
  const pager = new Pager(loadDLQ);
  async function loadDLQ() {
    try {
      const r = await api('GET', `/v1/queues/${enc(arg)}/dlq` + qs({ after: pager.after, limit: 20, reason: reason.value }));
      pager.next = r.next && r.messages.length === 20 ? r.next : '';
      list.replaceChildren(table(['ID', 'Reason', 'Source', '#Deliveries', 'Failed at', 'Last error', 'Body'], r.messages.map((m) => {
        const d = m.dead_letter || {};
        return [h('code', {}, m.id), d.reason || '–', `${d.source_queue || '?'} ${d.source_id || ''}`, count(d.deliveries), d.failed_at || '–', d.last_error || '',
          h('pre', {}, m.body !== undefined ? m.body : `(base64) ${m.body_base64 || ''}`)];
      }), 'The dead-letter queue is empty.'), pager.controls());
    } catch (e) { list.replaceChildren(errorBox(e)); }
  }
  reason.addEventListener('change', () => { pager.stack = []; pager.after = ''; loadDLQ(); });
  root.append(h('h2', {}, 'Dead-letter queue ', h('code', {}, dlq)), h('div', { class: 'toolbar' }, h('label', {}, 'Reason', reason)), list);
  await loadDLQ();

  const rate = h('input', { name: 'rate', type: 'number', min: 1, max: 10000, value: '500' });
  const limit = h('input', { name: 'limit', type: 'number', min: 1, placeholder: 'all' });
  const dest = h('input', { name: 'destination', placeholder: "each message's source" });
  const msg = h('div', {});
  const progress = h('div', { id: 'redrive-task' });
  root.append(h('h2', {}, 'Redrive'),
    h('p', { class: 'muted' }, 'Moves dead-lettered messages back to their source queue (or to a destination) at a bounded rate, in the background.'),
    h('form', { class: 'inline', id: 'redrive', onsubmit: async (ev) => {
      ev.preventDefault();
      msg.replaceChildren();
      const body = { rate_per_sec: Number(rate.value) };
      if (limit.value) body.limit = Number(limit.value);
      if (dest.value) body.destination = dest.value;
      if (reason.value) body.filter = { reason: reason.value };
      if (!await confirmAction('Redrive', `Move ${limit.value || 'every'} message${reason.value ? ' with reason ' + reason.value : ''} of ${dlq} to ${dest.value || 'its source queue'} at ${rate.value}/s?`, dlq)) return;
      try {
        const task = await api('POST', `/v1/queues/${enc(dlq)}/redrive`, body); // the route names the DLQ, as `broker dlq redrive` resolves it
        msg.replaceChildren(notice(`Redrive task ${task.id} started.`));
        ctx.every(1000, async () => {
          const t = await api('GET', `/v1/tasks/${task.id}`);
          progress.replaceChildren(h('p', { 'data-state': t.state }, `task ${t.id}: ${t.state} · moved ${count(t.moved)} · failed ${count(t.failed)}${t.error ? ' · ' + t.error : ''}`));
          if (t.state !== 'running') { await loadDLQ(); await loadStats(); return false; }
          return true;
        });
      } catch (e) { msg.replaceChildren(errorBox(e)); }
    } }, h('label', {}, 'Rate (messages/s)', rate), h('label', {}, 'At most', limit), h('label', {}, 'Destination', dest),
    h('button', { type: 'submit', class: 'danger' }, 'Redrive…')), msg, progress);
}
