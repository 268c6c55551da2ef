// Consumer groups: the list (paginated), one group (members, assignment,
// lag per partition; a share group's share-partitions) and the offset
// reset (a dry run first, then execute after a confirmation), with the
// parameters of `broker groups reset-offsets`; not for a share group,
// whose start offsets AlterShareGroupOffsets moves.
import { api, h, table, errorBox, notice, count, confirmAction, qs, Pager } from './lib.js';

const enc = encodeURIComponent;

export async function groupsPage(root, { ctx }) {
  root.append(h('h1', {}, 'Consumer groups'));
  const list = h('div', {});
  const pager = new Pager(load);
  async function load() {
    try {
      const r = await api('GET', '/v1/admin/groups' + qs({ after: pager.after, limit: 50 }));
      pager.next = r.next || '';
      list.replaceChildren(table(['Group', 'State', 'Protocol type', '#Members', '#Lag'], r.groups.map((g) => [
        h('a', { href: `#/groups/${enc(g.group)}` }, g.group), g.state, g.protocol_type || '–', count(g.members), count(g.lag),
      ]), 'No consumer groups.'), pager.controls());
    } catch (e) { list.replaceChildren(errorBox(e)); }
  }
  root.append(list);
  ctx.every(5000, load);
}

export async function groupPage(root, { arg, ctx }) {
  root.append(h('h1', {}, 'Consumer group ', h('code', {}, arg)));
  const info = h('div', {});
  root.append(info);
  let topicsSeen = [];
  let share = false;
  async function load() {
    try {
      const g = await api('GET', `/v1/admin/groups/${enc(arg)}`);
      topicsSeen = [...new Set(g.offsets.map((o) => o.topic))];
      share = g.protocol_type === 'share';
      const positions = share ? [
        h('h2', {}, 'Share partitions'),
        h('p', { class: 'muted' }, 'Start offset: below it every record is acknowledged or archived. In flight: acquired by a member now. Available: waiting for delivery.'),
        h('div', { id: 'share-partitions' }, table(['Topic', '#Partition', '#Start offset', '#In flight', '#Available', '#Lag'], (g.share_partitions || []).map((p) => [
          h('a', { href: `#/browse?topic=${enc(p.topic)}&partition=${p.partition}&offset=${p.start_offset}` }, p.topic), count(p.partition), count(p.start_offset),
          count(p.in_flight), count(p.available), count(p.lag),
        ]), 'No share partitions: no member has fetched yet.')),
      ] : [
        h('h2', {}, 'Offsets and lag'),
        h('div', { id: 'group-offsets' }, table(['Topic', '#Partition', '#Committed', '#Log start', '#End', '#Lag', 'Member'], g.offsets.map((o) => [
          h('a', { href: `#/browse?topic=${enc(o.topic)}&partition=${o.partition}&offset=${o.committed}` }, o.topic), count(o.partition), count(o.committed),
          count(o.log_start_offset), count(o.high_watermark), count(o.lag), o.member_id || '–',
        ]), 'No committed offsets.')),
      ];
      info.replaceChildren(
        h('p', { class: 'muted' }, `state ${g.state} · ${g.protocol_type || 'no protocol type'}${g.protocol ? ' / ' + g.protocol : ''} · total lag ${count(g.lag)}`),
        h('h2', {}, 'Members'),
        table(['Member', 'Client', 'Host', 'Assignment'], g.members.map((m) => [
          h('code', {}, m.member_id), m.client_id, m.client_host,
          m.assignment.map((a) => `${a.topic}: ${a.partitions.join(', ')}`).join('; ') || '–',
        ]), 'No members: the group is empty.'),
        ...positions);
    } catch (e) { info.replaceChildren(errorBox(e)); }
  }
  await load();
  ctx.every(5000, load);
  if (share) {
    // POST reset-offsets answers 404 group_not_found for a share group.
    root.append(h('h2', {}, 'Reset offsets'),
      h('p', { class: 'muted', id: 'share-reset-note' }, 'A share group\'s start offsets are reset with AlterShareGroupOffsets while it has no members: kafka-share-groups.sh --reset-offsets … --execute.'));
    return;
  }

  const topicsIn = h('input', { name: 'topics', placeholder: 'orders orders2:0,1 (space separated)', size: 40 });
  const all = h('input', { type: 'checkbox', name: 'all_topics' });
  const target = h('select', { name: 'target' }, ['earliest', 'latest', 'datetime', 'offset'].map((t) => h('option', { value: t }, 'to ' + t)));
  const value = h('input', { name: 'target_value', placeholder: 'offset or 2026-01-02T15:04:05Z' });
  const msg = h('div', {});
  const preview = h('div', { id: 'reset-preview' });
  const execute = h('button', { class: 'danger', id: 'reset-execute', type: 'button', disabled: true }, 'Execute reset…');
  let planned = null;

  function request(exec) {
    const body = { execute: exec };
    if (all.checked) body.all_topics = true;
    else body.topics = topicsIn.value.split(/\s+|;/).map((s) => s.trim()).filter(Boolean);
    if (target.value === 'earliest') body.to_earliest = true;
    else if (target.value === 'latest') body.to_latest = true;
    else if (target.value === 'datetime') body.to_datetime = value.value;
    else body.to_offset = Number(value.value);
    return body;
  }
  function show(r) {
    preview.replaceChildren(table(['Topic', '#Partition', '#Current', '#New'], r.offsets.map((o) => [o.topic, count(o.partition), o.current < 0 ? '–' : count(o.current), count(o.new)])));
  }
  async function dryRun(ev) {
    ev.preventDefault();
    msg.replaceChildren();
    execute.disabled = true;
    try {
      planned = request(false);
      const r = await api('POST', `/v1/admin/groups/${enc(arg)}/reset-offsets`, planned);
      show(r);
      msg.replaceChildren(notice('Dry run: nothing changed. Execute to commit these offsets.'));
      execute.disabled = false;
    } catch (e) { msg.replaceChildren(errorBox(e)); preview.replaceChildren(); }
  }
  execute.addEventListener('click', async () => {
    if (!planned) return;
    if (!await confirmAction('Reset offsets', `Commit the offsets shown for group ${arg}? Its consumers will resume from them.`, arg)) return;
    try {
      const r = await api('POST', `/v1/admin/groups/${enc(arg)}/reset-offsets`, { ...planned, execute: true });
      show(r);
      msg.replaceChildren(notice(`Offsets of group ${arg} reset.`));
      execute.disabled = true;
      await load();
    } catch (e) { msg.replaceChildren(errorBox(e)); }
  });
  root.append(h('h2', {}, 'Reset offsets'),
    h('p', { class: 'muted' }, 'Only while the group is empty (stop its consumers first). A dry run shows the new offsets; nothing changes until you execute.'),
    h('form', { class: 'inline', id: 'reset-offsets', onsubmit: dryRun },
      h('label', {}, 'Topics', topicsIn), h('label', { class: 'check' }, all, 'all topics'), h('label', {}, 'Target', target), h('label', {}, 'Offset / time', value),
      h('button', { type: 'submit', id: 'reset-dry-run' }, 'Dry run'), execute),
    msg, preview);
  if (topicsSeen.length) topicsIn.value = topicsSeen.join(' ');
}
