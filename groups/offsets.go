package groups

// Committed offsets: OffsetCommit, OffsetFetch, OffsetDelete and offset
// retention, after Apache Kafka's OffsetMetadataManager.

import (
	"time"

	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
)

// pendingCommit is one offset appended by a commit that is not yet durable.
type pendingCommit struct {
	tp    topicPartition
	entry *offsetEntry
}

// Commit handles an OffsetCommit request. Partitions of unknown topics get
// topics.ErrUnknownTopic; the others are checked against the group
// (generation, member, state; member epoch for a consumer group) and
// appended to __consumer_offsets. The offsets become visible to
// FetchOffsets once durable, and Wait returns after that.
func (c *Coordinator) Commit(req CommitRequest, now time.Time) *Future[CommitResult] {
	res, topicIDs, valid := c.checkCommitTopics(req)
	// written marks the partitions whose records were appended: a failed
	// write turns exactly those into errors.
	var written [][2]int
	failed := func(r CommitResult, err error) CommitResult {
		for _, w := range written {
			r.Topics[w[0]][w[1]] = err
		}
		return r
	}
	f := newFuture(failed)
	f.mapErr = commitAppendError
	if valid == 0 {
		f.ch <- res
		return f
	}
	if c.isShareGroup(req.Group) {
		// A share group has no committed offsets (KIP-932): Kafka answers
		// GROUP_ID_NOT_FOUND rather than storing classic offsets under its
		// name. Checked before c.mu, as the consumer heartbeat does (lock
		// order: share.mu is never held with c.mu).
		res.setAll(ErrGroupIDNotFound)
		f.ch <- res
		return f
	}
	o := &op{now: now}
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		f.persists = o.persists
		f.ch <- res
	}()
	g, err := c.commitGroupLocked(req, now)
	if err != nil {
		res.setAll(err)
		return f
	}
	cw := c.commitRecordsLocked(g, req, res, topicIDs, now)
	written = cw.written
	if len(cw.recs) == 0 {
		c.dropIfUnusedLocked(g)
		return f
	}
	if err := c.appendCommitLocked(o, g, cw); err != nil {
		for _, w := range written {
			res.Topics[w[0]][w[1]] = err
		}
		written = nil
		c.dropIfUnusedLocked(g)
	}
	return f
}

// setAll sets err on every partition that has no error yet.
func (r CommitResult) setAll(err error) {
	for i := range r.Topics {
		for j := range r.Topics[i] {
			if r.Topics[i][j] == nil {
				r.Topics[i][j] = err
			}
		}
	}
}

// checkCommitTopics is the first step of Commit: a result with
// topics.ErrUnknownTopic for the partitions of unknown topics, the topic
// IDs, and how many partitions remain.
func (c *Coordinator) checkCommitTopics(req CommitRequest) (CommitResult, [][16]byte, int) {
	res := CommitResult{Topics: make([][]error, len(req.Topics))}
	topicIDs := make([][16]byte, len(req.Topics))
	valid := 0
	for i, t := range req.Topics {
		res.Topics[i] = make([]error, len(t.Partitions))
		tp, ok := c.tm.Topic(t.Topic)
		if ok {
			topicIDs[i] = tp.ID
		}
		for j, p := range t.Partitions {
			if !ok || p.Partition < 0 || p.Partition >= tp.NumPartitions() {
				res.Topics[i][j] = topics.ErrUnknownTopic
				continue
			}
			valid++
		}
	}
	return res, topicIDs, valid
}

// commitGroupLocked is the group a commit goes to, validated against the
// request (created for a commit outside group management).
// REQUIRES: c.mu held.
func (c *Coordinator) commitGroupLocked(req CommitRequest, now time.Time) (*group, error) {
	g := c.mu.groups[req.Group]
	if g == nil {
		switch {
		case req.Generation < 0:
			// A commit outside group management creates a "simple"
			// group (Kafka: admin clients, manual assignment).
			g = c.newGroupLocked(req.Group)
		case req.Version >= 9:
			return nil, ErrGroupIDNotFound
		default:
			return nil, ErrIllegalGeneration
		}
	}
	if err := validateOffsetCommit(g, req); err != nil {
		c.dropIfUnusedLocked(g)
		return nil, err
	}
	if g.is(StateStable) || g.is(StatePreparingRebalance) {
		if m := g.members[req.MemberID]; m != nil {
			m.heartbeatDeadline = now.Add(m.sessionTimeout) // commits keep the session
		}
	}
	return g, nil
}

// commitWrite is what one OffsetCommit appends.
type commitWrite struct {
	recs    []topics.Record
	rows    []rowOp
	commits []pendingCommit
	written [][2]int // request topic and partition index of each record
}

// commitRecordsLocked builds the records and index rows of a commit's
// valid partitions; metadata over the limit is refused in res.
// REQUIRES: c.mu held.
func (c *Coordinator) commitRecordsLocked(g *group, req CommitRequest, res CommitResult, topicIDs [][16]byte, now time.Time) commitWrite {
	var w commitWrite
	for i, t := range req.Topics {
		for j, p := range t.Partitions {
			if res.Topics[i][j] != nil {
				continue
			}
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > c.cfg.MaxOffsetMetadataBytes {
				res.Topics[i][j] = ErrOffsetMetadataTooLarge
				continue
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: md, commitTime: now, topicID: topicIDs[i]}
			if req.Retention != nil {
				e.expireTime = now.Add(*req.Retention)
			}
			rec, rows, pc := c.offsetRecordLocked(g, t.Topic, p.Partition, e)
			w.recs = append(w.recs, rec)
			w.rows = append(w.rows, rows...)
			w.commits = append(w.commits, pc)
			w.written = append(w.written, [2]int{i, j})
		}
	}
	return w
}

// offsetRecordLocked is the record, index rows and pending commit of one
// offset. REQUIRES: c.mu held.
func (c *Coordinator) offsetRecordLocked(g *group, topic string, partition int32, e *offsetEntry) (topics.Record, []rowOp, pendingCommit) {
	tp := topicPartition{topic, partition}
	value := encodeOffsetCommitValue(e)
	var rows []rowOp
	if old := g.offsets[tp]; old != nil && old.topicID != e.topicID {
		rows = append(rows, rowOp{key: offsetRowKey(g.id, old.topicID, partition), del: true})
	}
	rows = append(rows, rowOp{key: offsetRowKey(g.id, e.topicID, partition), value: encodeNamed(topic, value)})
	return topics.Record{Key: offsetCommitKey(g.name, topic, partition), Value: value}, rows, pendingCommit{tp, e}
}

// appendCommitLocked appends a commit's records; its offsets become
// visible once durable. REQUIRES: c.mu held.
func (c *Coordinator) appendCommitLocked(o *op, g *group, cw commitWrite) error {
	supersedeRows, supersede := c.supersedeTxnOffsetsLocked(g, cw.commits)
	ps, base, err := c.appendLocked(o, g, cw.recs, append(cw.rows, supersedeRows...))
	if err != nil {
		c.log.Warn().Err(err).Str("group", g.name).Msg("storing offsets failed")
		return commitAppendError(err)
	}
	supersede()
	commits := cw.commits
	for i := range commits {
		commits[i].entry.logOffset = base + int64(i)
		g.pendingTPs[commits[i].tp]++
	}
	g.pendingCommits++
	c.metrics.offsetCommits.Add(float64(len(commits)))
	ps.after = func(err error) {
		c.mu.Lock()
		defer c.mu.Unlock()
		c.finishCommitsLocked(g, commits, err)
	}
	return nil
}

// finishCommitsLocked ends one pending commit of g whose write completed
// with err: on success its offsets become visible, in log order (a
// late-completing older commit never overwrites a newer one or revives a
// deleted one). REQUIRES: c.mu held.
func (c *Coordinator) finishCommitsLocked(g *group, commits []pendingCommit, err error) {
	g.pendingCommits--
	for _, pc := range commits {
		if g.pendingTPs[pc.tp]--; g.pendingTPs[pc.tp] <= 0 {
			delete(g.pendingTPs, pc.tp)
		}
		if err != nil || c.mu.groups[g.name] != g {
			continue
		}
		if cur := g.offsets[pc.tp]; cur != nil && cur.logOffset > pc.entry.logOffset {
			continue // a later commit is already visible
		}
		if at, ok := g.deletedAt[pc.tp]; ok && at > pc.entry.logOffset {
			continue // deleted after this commit
		}
		g.offsets[pc.tp] = pc.entry
	}
	if g.pendingCommits == 0 {
		clear(g.deletedAt)
	}
}

// txnChunkBytes bounds the key and value bytes of one batch of a
// transaction's offset records, far below the default max.message.bytes of
// __consumer_offsets: a transaction may stage any number of offsets, and
// its commit must never be refused as too large (it was decided already).
const txnChunkBytes = 256 << 10

// CommitTransaction writes the offsets a committing transaction staged,
// for each group of commits, to the group's partition of __consumer_offsets
// with their index rows, and with them the appends of with (the
// transaction's markers) and the rows extra adds (the coordinator's outcome
// row), in one topics.Manager.AppendAtomic call: one Pebble batch, so after
// a crash either all of it is in the store or none of it is. It returns
// once that write is durable and the offsets are visible to FetchOffsets,
// or with the error that stopped it: then nothing was applied, unless the
// sync itself failed (the outcome of the write is then unknown, as for
// any write; the offsets stay invisible).
//
// The offsets were validated against their group when staged
// (ValidateCommit): no membership is checked, and a group that does not
// exist is created (a "simple" group, as OffsetCommit outside group
// management creates). Offsets of partitions that no longer exist are
// dropped, as Kafka drops them. A group's offsets may span several record
// batches (txnChunkBytes), all in the one Pebble batch.
//
// Lock order: c.mu, then the partitions' locks (AppendAtomic); extra runs
// under both and must take no lock. c.mu is released before the sync.
func (c *Coordinator) CommitTransaction(commits []TxnCommit, with []*topics.Append, extra func(b *pebblestore.Batch), now time.Time) error {
	all := append([]*topics.Append(nil), with...)
	var writes []*txnGroupWrite
	var created []*group

	c.mu.Lock()
	if c.mu.replicated != nil && len(commits) > 0 {
		c.mu.Unlock()
		return ErrTxnOffsetsReplicated
	}
	abandon := func(err error) error {
		for _, g := range created {
			c.dropIfUnusedLocked(g)
		}
		c.mu.Unlock()
		return commitAppendError(err)
	}
	for _, tc := range commits {
		g := c.mu.groups[tc.Group]
		if g == nil {
			g = c.newGroupLocked(tc.Group)
			created = append(created, g)
		}
		w, err := c.txnGroupAppendsLocked(g, tc, now)
		if err != nil {
			return abandon(err)
		}
		writes = append(writes, w)
		for _, ch := range w.chunks {
			all = append(all, ch.a)
		}
	}
	pa, err := c.tm.AppendAtomic(all, extra, now)
	if err != nil {
		return abandon(err)
	}
	c.startTxnCommitsLocked(writes)
	c.mu.Unlock()
	return c.finishTxnWrites(writes, pa)
}

// txnChunk is one record batch of a transaction's offsets for one group.
type txnChunk struct {
	a       *topics.Append
	commits []pendingCommit
}

// txnGroupWrite is what a transaction's commit appends for one group.
type txnGroupWrite struct {
	g      *group
	chunks []txnChunk
}

// txnGroupAppendsLocked builds the appends of one group's staged offsets,
// in batches of at most txnChunkBytes. REQUIRES: c.mu held.
func (c *Coordinator) txnGroupAppendsLocked(g *group, tc TxnCommit, now time.Time) (*txnGroupWrite, error) {
	w := &txnGroupWrite{g: g}
	var recs []topics.Record
	var rows []rowOp
	var pcs []pendingCommit
	size := 0
	flush := func() error {
		if len(recs) == 0 {
			return nil
		}
		a, err := c.offsetsAppendLocked(g, recs, rows, now)
		if err != nil {
			return err
		}
		w.chunks = append(w.chunks, txnChunk{a, pcs})
		recs, rows, pcs, size = nil, nil, nil, 0
		return nil
	}
	for _, t := range tc.Topics {
		topic, ok := c.tm.Topic(t.Topic)
		for _, p := range t.Partitions {
			if !ok || p.Partition < 0 || p.Partition >= topic.NumPartitions() {
				continue // deleted since the offset was staged: dropped
			}
			md := ""
			if p.Metadata != nil {
				md = *p.Metadata
			}
			if len(md) > c.cfg.MaxOffsetMetadataBytes {
				// TxnOffsetCommit refuses such offsets; only a row
				// staged by an older broker can hold one.
				c.log.Warn().Str("group", g.name).Str("topic", t.Topic).Int32("partition", p.Partition).
					Msg("a transactional offset with metadata over the limit is dropped")
				continue
			}
			e := &offsetEntry{offset: p.Offset, leaderEpoch: p.LeaderEpoch, metadata: md, commitTime: now, topicID: topic.ID}
			rec, rs, pc := c.offsetRecordLocked(g, t.Topic, p.Partition, e)
			recs = append(recs, rec)
			rows = append(rows, rs...)
			pcs = append(pcs, pc)
			if size += len(rec.Key) + len(rec.Value); size >= txnChunkBytes {
				if err := flush(); err != nil {
					return nil, err
				}
			}
		}
	}
	if err := flush(); err != nil {
		return nil, err
	}
	return w, nil
}

// startTxnCommitsLocked marks the offsets of an applied transaction commit
// pending until its write is durable. REQUIRES: c.mu held.
func (c *Coordinator) startTxnCommitsLocked(writes []*txnGroupWrite) {
	records := 0
	for _, w := range writes {
		if len(w.chunks) == 0 {
			c.dropIfUnusedLocked(w.g)
			continue
		}
		w.g.rowWritten = true
		w.g.pendingCommits++
		for _, ch := range w.chunks {
			for i := range ch.commits {
				ch.commits[i].entry.logOffset = ch.a.BaseOffset + int64(i)
				w.g.pendingTPs[ch.commits[i].tp]++
			}
			c.metrics.offsetCommits.Add(float64(len(ch.commits)))
			records += len(ch.commits)
		}
	}
	c.metrics.recordsAppended.Add(float64(records))
}

// validateOffsetCommit is Kafka's ClassicGroup.validateOffsetCommit.
// ValidateCommit checks a transactional offset commit (TxnOffsetCommit)
// against the group as validateOffsetCommit does for OffsetCommit: a
// generation and member that are not current are fenced (KIP-447).
func (c *Coordinator) ValidateCommit(req CommitRequest) error {
	if req.Generation < 0 && req.MemberID == "" && req.InstanceID == nil {
		return nil // TxnOffsetCommit v0-v2 and producers outside a group
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.mu.groups[req.Group]
	if g == nil {
		return ErrIllegalGeneration
	}
	return validateOffsetCommit(g, req)
}

// CheckOffsetMetadata returns ErrOffsetMetadataTooLarge for an offset's
// metadata over Config.MaxOffsetMetadataBytes (TxnOffsetCommit checks it
// when staging, as OffsetCommit does when committing).
func (c *Coordinator) CheckOffsetMetadata(metadata *string) error {
	if metadata != nil && len(*metadata) > c.cfg.MaxOffsetMetadataBytes {
		return ErrOffsetMetadataTooLarge
	}
	return nil
}

func validateOffsetCommit(g *group, req CommitRequest) error {
	if g.is(StateDead) {
		return ErrCoordinatorNotAvailable
	}
	if g.cg != nil {
		return validateConsumerOffsetCommit(g, req.MemberID, req.Generation)
	}
	if req.Generation < 0 && g.is(StateEmpty) {
		return nil // admin tools and manual assignment commit to Empty groups
	}
	if req.Generation >= 0 || req.MemberID != "" || req.InstanceID != nil {
		if err := g.validateMember(req.MemberID, req.InstanceID); err != nil {
			return err
		}
		if req.Generation != g.generation {
			return ErrIllegalGeneration
		}
	} else if !g.is(StateEmpty) {
		return ErrUnknownMemberID
	}
	if g.is(StateCompletingRebalance) {
		return ErrRebalanceInProgress
	}
	return nil
}

// currentTopicID is the ID of the topic named name, and whether it exists.
func (c *Coordinator) currentTopicID(name string, cache map[string][16]byte) ([16]byte, bool) {
	if id, ok := cache[name]; ok {
		return id, id != [16]byte{}
	}
	t, ok := c.tm.Topic(name)
	var id [16]byte
	if ok {
		id = t.ID
	}
	cache[name] = id
	return id, ok
}

// FetchOffsets handles one group of an OffsetFetch request. A group that
// does not exist has no offsets: -1 for each partition asked for, no error
// (as Kafka answers). Offsets committed to a topic since deleted are not
// returned. With RequireStable, a partition whose latest commit is not yet
// durable gets ErrUnstableOffsetCommit, which clients retry.
func (c *Coordinator) FetchOffsets(req FetchOffsetsRequest) FetchOffsetsResult {
	var res FetchOffsetsResult
	ids := map[string][16]byte{}
	c.mu.Lock()
	defer c.mu.Unlock()
	g := c.mu.groups[req.Group]
	if g != nil && g.cg != nil && req.MemberID != nil {
		if err := validateConsumerOffsetCommit(g, *req.MemberID, req.MemberEpoch); err != nil {
			res.Err = err
			return res
		}
	}
	visible := func(tp topicPartition) *offsetEntry {
		if g == nil {
			return nil
		}
		e := g.offsets[tp]
		if e == nil {
			return nil
		}
		if id, ok := c.currentTopicID(tp.topic, ids); !ok || id != e.topicID {
			return nil
		}
		return e
	}
	fill := func(tp topicPartition, e *offsetEntry) FetchedOffset {
		fo := FetchedOffset{Partition: tp.partition, Offset: -1, LeaderEpoch: -1}
		empty := ""
		fo.Metadata = &empty
		if req.RequireStable && ((g != nil && (g.pendingTPs[tp] > 0 || g.txnPendingOn(tp))) ||
			(c.cfg.PendingTxnOffset != nil && c.cfg.PendingTxnOffset(req.Group, tp.topic, tp.partition))) {
			fo.Err = ErrUnstableOffsetCommit
			return fo
		}
		if e != nil {
			md := e.metadata
			fo.Offset, fo.LeaderEpoch, fo.Metadata = e.offset, e.leaderEpoch, &md
		}
		return fo
	}
	if req.Topics == nil {
		if g == nil {
			return res
		}
		byTopic := map[string]int{}
		for _, tp := range sortedOffsets(g) {
			e := visible(tp)
			if e == nil {
				continue
			}
			i, ok := byTopic[tp.topic]
			if !ok {
				i = len(res.Topics)
				byTopic[tp.topic] = i
				res.Topics = append(res.Topics, FetchedTopic{Topic: tp.topic})
			}
			res.Topics[i].Partitions = append(res.Topics[i].Partitions, fill(tp, e))
		}
		return res
	}
	res.Topics = make([]FetchedTopic, len(req.Topics))
	for i, t := range req.Topics {
		res.Topics[i] = FetchedTopic{Topic: t.Topic, Partitions: make([]FetchedOffset, len(t.Partitions))}
		for j, p := range t.Partitions {
			tp := topicPartition{t.Topic, p}
			res.Topics[i].Partitions[j] = fill(tp, visible(tp))
		}
	}
	return res
}

// deleteOffsetsLocked appends tombstones for tps and removes them from
// memory and the index. REQUIRES: c.mu held.
func (c *Coordinator) deleteOffsetsLocked(o *op, g *group, tps []topicPartition) error {
	if len(tps) == 0 {
		return nil
	}
	recs := make([]topics.Record, 0, len(tps))
	rows := make([]rowOp, 0, len(tps))
	for _, tp := range tps {
		e := g.offsets[tp]
		recs = append(recs, topics.Record{Key: offsetCommitKey(g.name, tp.topic, tp.partition)})
		if e != nil {
			rows = append(rows, rowOp{key: offsetRowKey(g.id, e.topicID, tp.partition), del: true})
		}
	}
	rows = append(rows, c.dropTxnOffsetsLocked(g, tps)...)
	_, base, err := c.appendLocked(o, g, recs, rows)
	if err != nil {
		return commitAppendError(err)
	}
	for i, tp := range tps {
		delete(g.offsets, tp)
		if g.pendingCommits > 0 {
			g.deletedAt[tp] = base + int64(i)
		}
	}
	return nil
}

// DeleteOffsets handles an OffsetDelete request: the offsets of an Empty
// group, or of topics a "consumer" group does not subscribe to, are
// deleted.
func (c *Coordinator) DeleteOffsets(groupName string, req []OffsetDeleteTopic, now time.Time) *Future[OffsetDeleteResult] {
	failed := func(r OffsetDeleteResult, err error) OffsetDeleteResult {
		for i := range r.Topics {
			for j := range r.Topics[i] {
				if r.Topics[i][j] == nil {
					r.Topics[i][j] = err
				}
			}
		}
		return r
	}
	f := newFuture(failed)
	f.mapErr = commitAppendError
	o := &op{now: now}
	c.mu.Lock()
	defer func() {
		c.mu.Unlock()
		f.persists = o.persists
	}()
	g := c.mu.groups[groupName]
	switch {
	case g == nil || g.is(StateDead):
		f.ch <- OffsetDeleteResult{Err: ErrGroupIDNotFound}
		return f
	case !g.is(StateEmpty) && !g.usesConsumerProtocol() && g.cg == nil:
		f.ch <- OffsetDeleteResult{Err: ErrNonEmptyGroup}
		return f
	}
	res := OffsetDeleteResult{Topics: make([][]error, len(req))}
	var tps []topicPartition
	for i, t := range req {
		res.Topics[i] = make([]error, len(t.Partitions))
		subscribed := !g.is(StateEmpty) && g.isSubscribedToTopic(t.Topic)
		for j, p := range t.Partitions {
			if subscribed {
				res.Topics[i][j] = ErrGroupSubscribedToTopic
				continue
			}
			tp := topicPartition{t.Topic, p}
			if g.offsets[tp] != nil || g.pendingTPs[tp] > 0 || g.txnPendingOn(tp) {
				tps = append(tps, tp)
			}
		}
	}
	if err := c.deleteOffsetsLocked(o, g, dedupe(tps)); err != nil {
		res = failed(res, err)
	}
	f.ch <- res
	return f
}

func dedupe(tps []topicPartition) []topicPartition {
	seen := make(map[topicPartition]bool, len(tps))
	out := tps[:0]
	for _, tp := range tps {
		if !seen[tp] {
			seen[tp] = true
			out = append(out, tp)
		}
	}
	return out
}

// expireOffsetsLocked is the retention pass (Kafka's
// cleanupGroupMetadata): it deletes the offsets that expired and the
// offsets of deleted topics, then Empty groups left without offsets.
// REQUIRES: c.mu held.
func (c *Coordinator) expireOffsetsLocked(o *op) {
	if len(c.mu.strayRows) > 0 {
		b := c.store.NewBatch()
		for _, k := range c.mu.strayRows {
			b.Delete(k)
		}
		if err := b.Commit(); err != nil {
			c.log.Warn().Err(err).Msg("deleting stray offset rows failed")
		} else {
			c.mu.strayRows = nil
		}
	}
	ids := map[string][16]byte{}
	expired := 0
	for _, g := range c.mu.groups {
		var tps []topicPartition
		all := true
		for tp, e := range g.offsets {
			if id, ok := c.currentTopicID(tp.topic, ids); !ok || id != e.topicID {
				tps = append(tps, tp) // the topic was deleted
				continue
			}
			if c.offsetExpired(g, tp, e, o.now) {
				tps = append(tps, tp)
				continue
			}
			all = false
		}
		if len(tps) > 0 {
			if err := c.deleteOffsetsLocked(o, g, tps); err != nil {
				c.log.Warn().Err(err).Str("group", g.name).Msg("deleting expired offsets failed")
				continue
			}
			expired += len(tps)
		}
		if all && g.is(StateEmpty) && g.pendingCommits == 0 && len(g.pending) == 0 && len(g.txnOffsets) == 0 {
			if err := c.deleteGroupLocked(o, g); err != nil {
				c.log.Warn().Err(err).Str("group", g.name).Msg("deleting an expired group failed")
				continue
			}
			c.log.Info().Str("group", g.name).Msg("empty group removed: its offsets expired")
		}
	}
	if expired > 0 {
		c.metrics.expiredOffsets.Add(float64(expired))
		c.log.Info().Int("offsets", expired).Msg("expired committed offsets removed")
	}
}

// offsetExpired is Kafka's ClassicGroup.offsetExpirationCondition with
// OffsetExpirationConditionImpl.
func (c *Coordinator) offsetExpired(g *group, tp topicPartition, e *offsetEntry, now time.Time) bool {
	var base time.Time
	switch {
	case g.cg != nil:
		// Kafka ConsumerGroup: from the commit, unless subscribed.
		if g.cg.isSubscribed(tp.topic) {
			return false
		}
		base = e.commitTime
	case g.protocolType == nil:
		base = e.commitTime // a simple group: from each commit
	case g.is(StateEmpty):
		base = g.stateTimestamp // from when the group became Empty
		if base.IsZero() {
			base = e.commitTime
		}
	case g.usesConsumerProtocol() && g.subscribedTopics != nil && g.is(StateStable):
		if g.subscribedTopics[tp.topic] {
			return false
		}
		base = e.commitTime
	default:
		return false
	}
	if g.pendingTPs[tp] > 0 || g.txnPendingOn(tp) {
		return false
	}
	if !e.expireTime.IsZero() {
		return !now.Before(e.expireTime)
	}
	return now.Sub(base) >= c.cfg.OffsetsRetention
}
