// Transactions: every transactional ID with its state, producer and the
// partitions of its open transaction (paginated, filtered by state).
import { api, h, table, errorBox, count, duration, time, qs, Pager } from './lib.js';

export async function transactionsPage(root, { ctx }) {
  root.append(h('h1', {}, 'Transactions'));
  const state = h('select', { name: 'state' }, ['', 'Ongoing', 'PrepareCommit', 'PrepareAbort', 'CompleteCommit', 'CompleteAbort', 'Empty'].map((s) => h('option', { value: s }, s || 'any state')));
  const list = h('div', {});
  const pager = new Pager(load);
  async function load() {
    try {
      const r = await api('GET', '/v1/admin/transactions' + qs({ after: pager.after, limit: 50, state: state.value }));
      pager.next = r.next || '';
      list.replaceChildren(table(['Transactional ID', 'State', '#Producer ID', '#Epoch', 'Timeout', 'Started', 'Open for', 'Partitions'], r.transactions.map((t) => [
        h('code', {}, t.transactional_id), t.state, String(t.producer_id), String(t.epoch), duration(t.timeout_ms), time(t.start_ms),
        t.start_ms >= 0 ? duration(t.duration_ms) : '–', t.partitions.map((p) => `${p.topic}/${p.partition}`).join(', ') || '–',
      ]), 'No transactional IDs.'), pager.controls());
    } catch (e) { list.replaceChildren(errorBox(e)); }
  }
  state.addEventListener('change', () => { pager.stack = []; pager.after = ''; load(); });
  root.append(h('div', { class: 'toolbar' }, h('label', {}, 'State', state)), list);
  ctx.every(5000, load);
}
