// Overview: the broker, its disk, and sparklines of throughput and lag
// computed from successive polls of GET /v1/admin/overview.
import { api, h, bytes, count, duration, sparkline, errorBox } from './lib.js';

// history survives navigation, so the sparklines keep their past.
const history = { at: [], offsets: [], lag: [], rate: [] };
const historyMax = 90;

function record(o) {
  const n = history.at.length;
  if (n) {
    const dt = (o.now_ms - history.at[n - 1]) / 1000;
    history.rate.push(dt > 0 ? Math.max(0, (o.offsets_total - history.offsets[n - 1]) / dt) : 0);
  }
  history.at.push(o.now_ms);
  history.offsets.push(o.offsets_total);
  history.lag.push(o.lag_total);
  for (const k of Object.keys(history)) {
    if (history[k].length > historyMax) history[k].shift();
  }
}

function card(label, value, extra, wide) {
  return h('div', { class: wide ? 'card wide' : 'card' }, h('div', { class: 'label' }, label), h('div', { class: 'value' }, value), extra);
}

export async function overviewPage(root, { ctx }) {
  root.append(h('h1', {}, 'Overview'));
  const body = h('div', {});
  root.append(body);
  let storage = null;
  let polls = 0;
  ctx.every(2000, async () => {
    try {
      const o = await api('GET', '/v1/admin/overview');
      if (polls++ % 5 === 0) storage = await api('GET', '/v1/admin/storage');
      record(o);
      const rate = history.rate.length ? history.rate[history.rate.length - 1] : 0;
      const used = o.disk_total_bytes > 0 ? o.disk_total_bytes - o.disk_usable_bytes : -1;
      const pct = o.disk_total_bytes > 0 ? (100 * used) / o.disk_total_bytes : 0;
      body.replaceChildren(
        h('div', { class: 'cards' },
          card('Cluster', o.cluster_id, h('div', { class: 'muted' }, `node ${o.node_id} · version ${o.version || 'unknown'}`), true),
          card('Uptime', duration(o.now_ms - o.started_ms)),
          card('Disk used', o.disk_total_bytes > 0 ? `${pct.toFixed(1)} %` : '–',
            [h('div', { class: 'bar' }, h('div', { style: `width:${pct.toFixed(1)}%` })),
              h('div', { class: 'muted' }, `${bytes(o.disk_usable_bytes)} free of ${bytes(o.disk_total_bytes)}`)]),
          card('Data directory', o.data_dir, null, true),
          card('Throughput', `${count(Math.round(rate))} rec/s`, sparkline(history.rate, 'spark-throughput'), true),
          card('Consumer lag', count(o.lag_total), sparkline(history.lag, 'spark-lag'), true),
          card('Topics', count(o.topics), h('div', { class: 'muted' }, `${count(o.partitions)} partitions`)),
          card('Records stored', count(o.records), h('div', { class: 'muted' }, bytes(o.bytes))),
          card('Consumer groups', count(o.groups)),
          card('Open transactions', count(o.open_transactions)),
          storage ? card('Queues', count(storage.queues), h('div', { class: 'muted' }, `${count(storage.dead_letters)} dead letters`)) : null,
          storage ? card('Event stores', count(storage.event_stores), h('div', { class: 'muted' }, `${count(storage.events)} events, ${count(storage.streams)} streams`)) : null,
          storage ? card('On disk', bytes(storage.bytes)) : null,
        ));
    } catch (e) {
      body.replaceChildren(errorBox(e));
    }
  });
}
