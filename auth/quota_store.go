package auth

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/vibemq/broker/pebblestore"
)

// A quota row (pebblestore.ClientQuotaKey) holds the JSON of a quotaRow:
// the entity's parts ({"type", "name"}, name null for a default entity)
// and its values by key. A row without values is deleted.

type quotaRow struct {
	Entity QuotaEntity        `json:"entity"`
	Values map[string]float64 `json:"values"`
}

// QuotasConfig configures Quotas.
type QuotasConfig struct {
	// WindowNum is the number of samples a rate is measured over (Kafka
	// quota.window.num); default 11.
	WindowNum int
	// WindowSize is the length of one sample (Kafka
	// quota.window.size.seconds); default 1 second.
	WindowSize time.Duration
	// MaxSensors bounds the rates kept (one per quota kind and user /
	// client-id pair that a quota applies to); when full, the rates idle
	// for a whole window are dropped first. Default 100000.
	MaxSensors int
}

// QuotaKind is what a sensor measures.
type QuotaKind int

// Quota kinds, each with its key.
const (
	QuotaKindProduce QuotaKind = iota // producer_byte_rate: bytes produced
	QuotaKindFetch                    // consumer_byte_rate: bytes fetched
	QuotaKindRequest                  // request_percentage: request time
	quotaKinds
)

var quotaKindKeys = [quotaKinds]string{QuotaProducerByteRate, QuotaConsumerByteRate, QuotaRequestPercentage}

// Quotas keeps the client quotas (rows read at open, an immutable index
// swapped atomically after each durable change) and the rates measured
// against them. writeMu serializes changes and is held across their sync;
// mu guards the sensor map; a sensor's own mutex its rate. All three are
// leaves.
type Quotas struct {
	store   *pebblestore.Store
	cfg     QuotasConfig
	writeMu sync.Mutex
	idx     atomic.Pointer[quotaIndex]
	mu      struct {
		sync.Mutex
		sensors map[sensorID]*QuotaSensor
	}
}

// quotaIndex is an immutable snapshot of every quota row.
type quotaIndex struct {
	rows map[string]quotaRow // by QuotaEntity.key of the sorted entity
	// enabled[kind]: some user or client-id entity sets the kind's key;
	// any: some kind is enabled.
	enabled [quotaKinds]bool
	any     bool
	// generation counts the changes since open.
	generation uint64
}

func (x *quotaIndex) value(kind QuotaKind, e QuotaEntity) (float64, bool) {
	row, ok := x.rows[e.key()]
	if !ok {
		return 0, false
	}
	v, ok := row.Values[quotaKindKeys[kind]]
	return v, ok
}

// OpenQuotas reads every quota row.
func OpenQuotas(store *pebblestore.Store, cfg QuotasConfig) (*Quotas, error) {
	if cfg.WindowNum <= 0 {
		cfg.WindowNum = 11
	}
	if cfg.WindowSize <= 0 {
		cfg.WindowSize = time.Second
	}
	if cfg.MaxSensors <= 0 {
		cfg.MaxSensors = 100000
	}
	q := &Quotas{store: store, cfg: cfg}
	q.mu.sensors = map[sensorID]*QuotaSensor{}
	prefix := []byte{pebblestore.PrefixClientQuota}
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	defer it.Close()
	rows := map[string]quotaRow{}
	for ok := it.First(); ok; ok = it.Next() {
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		var row quotaRow
		if err := json.Unmarshal(v, &row); err != nil {
			return nil, fmt.Errorf("auth: client quota row %x cannot be read: %w", it.Key(), pebblestore.ErrCorruption)
		}
		row.Entity = row.Entity.sorted()
		if _, err := validateEntity(row.Entity); err != nil {
			return nil, fmt.Errorf("auth: client quota row %x holds an invalid entity (%v): %w", it.Key(), err, pebblestore.ErrCorruption)
		}
		rows[row.Entity.key()] = row
	}
	q.idx.Store(buildQuotaIndex(rows, 0))
	return q, nil
}

func buildQuotaIndex(rows map[string]quotaRow, generation uint64) *quotaIndex {
	x := &quotaIndex{rows: rows, generation: generation}
	for _, row := range rows {
		if _, ip := row.Entity.name(QuotaEntityIP); ip {
			continue
		}
		for k, key := range quotaKindKeys {
			if _, ok := row.Values[key]; ok {
				x.enabled[k] = true
				x.any = true
			}
		}
	}
	return x
}

func quotaEntityHash(e QuotaEntity) [16]byte {
	sum := sha256.Sum256([]byte(e.key()))
	var h [16]byte
	copy(h[:], sum[:16])
	return h
}

// QuotaEntry is one entity with its values, as described.
type QuotaEntry struct {
	Entity QuotaEntity
	Values map[string]float64
}

// Describe returns the entities the filter selects, sorted by entity.
func (q *Quotas) Describe(f QuotaFilter) ([]QuotaEntry, error) {
	if err := f.validate(); err != nil {
		return nil, err
	}
	x := q.idx.Load()
	keys := make([]string, 0, len(x.rows))
	for k, row := range x.rows {
		if f.matches(row.Entity) {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	out := make([]QuotaEntry, 0, len(keys))
	for _, k := range keys {
		row := x.rows[k]
		values := make(map[string]float64, len(row.Values))
		for key, v := range row.Values {
			values[key] = v
		}
		out = append(out, QuotaEntry{Entity: append(QuotaEntity(nil), row.Entity...), Values: values})
	}
	return out, nil
}

// Alter applies the alterations, each entity validated on its own
// (ClientQuotaControlManager): the answer is one result per distinct
// entity, in the order they first appear. An entity named again is
// answered "Ignoring duplicate entity" while its first alteration still
// applies, and an entity with a key twice changes nothing, as Kafka 4.2
// does. The accepted ones are written in one durable batch before Alter
// returns and before checks see them; validateOnly checks without
// writing.
func (q *Quotas) Alter(alts []QuotaAlteration, validateOnly bool) ([]QuotaAlterResult, error) {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	cur := q.idx.Load().rows
	next := make(map[string]quotaRow, len(cur))
	for k, row := range cur {
		next[k] = row
	}
	var results []QuotaAlterResult
	at := map[string]int{}
	changed := map[string]bool{}
	for _, alt := range alts {
		e := NormalizeQuotaEntity(alt.Entity)
		k := e.key()
		if i, dup := at[k]; dup {
			results[i].Err = invalidQuota("Ignoring duplicate entity %s", e)
			continue
		}
		at[k] = len(results)
		values, err := alterEntity(e, alt.Ops, next[k].Values)
		results = append(results, QuotaAlterResult{Entity: e, Err: err})
		if err != nil {
			continue
		}
		next[k] = quotaRow{Entity: e, Values: values}
		changed[k] = true
	}
	if validateOnly || len(changed) == 0 {
		return results, nil
	}
	if err := q.write(next, changed); err != nil {
		return nil, err
	}
	for k := range changed {
		if len(next[k].Values) == 0 {
			delete(next, k)
		}
	}
	q.idx.Store(buildQuotaIndex(next, q.idx.Load().generation+1))
	return results, nil
}

// QuotaAlterResult is the answer for one entity of an Alter.
type QuotaAlterResult struct {
	Entity QuotaEntity
	Err    error
}

// alterEntity validates one entity's ops and returns its new values.
func alterEntity(e QuotaEntity, ops []QuotaOp, cur map[string]float64) (map[string]float64, error) {
	keys, err := validateEntity(e)
	if err != nil {
		return nil, err
	}
	dup := map[string]bool{}
	for _, op := range ops {
		if dup[op.Key] {
			return nil, invalidQuota("Ignoring duplicate entity %s", e)
		}
		dup[op.Key] = true
	}
	values := make(map[string]float64, len(cur)+len(ops))
	for k, v := range cur {
		values[k] = v
	}
	for _, op := range ops {
		if op.Remove {
			delete(values, op.Key)
			continue
		}
		if err := validateValue(keys, op.Key, op.Value); err != nil {
			return nil, err
		}
		values[op.Key] = op.Value
	}
	return values, nil
}

// write stores the changed rows (deleting the empty ones) in one synced
// batch.
func (q *Quotas) write(next map[string]quotaRow, changed map[string]bool) error {
	batch := q.store.NewBatch()
	for k := range changed {
		row := next[k]
		key := pebblestore.ClientQuotaKey(quotaEntityHash(row.Entity))
		if len(row.Values) == 0 {
			batch.Delete(key)
			continue
		}
		v, err := json.Marshal(row)
		if err != nil {
			batch.Close()
			return fmt.Errorf("auth: encoding a client quota: %v", err)
		}
		batch.Set(key, v)
	}
	if err := batch.Commit(); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	return nil
}

// Enabled reports whether any user or client-id quota of the kind is set:
// one atomic load, so the hot path costs nothing without quotas.
func (q *Quotas) Enabled(kind QuotaKind) bool {
	return q != nil && q.idx.Load().enabled[kind]
}

// Any reports whether any quota of any kind applies to some client.
func (q *Quotas) Any() bool {
	return q != nil && q.idx.Load().any
}

// Generation identifies the current quotas: a cached resolution (a
// connection's sensors) is valid while it is unchanged.
func (q *Quotas) Generation() uint64 { return q.idx.Load().generation }

// QuotaUser is the user entity name of a principal: the name after the
// principal type ("User:alice" is alice; Kafka's KafkaPrincipal.getName),
// so an unauthenticated client is the user ANONYMOUS, to which the
// default user's quotas apply unless ANONYMOUS has its own.
func QuotaUser(principal string) string {
	if i := strings.IndexByte(principal, ':'); i >= 0 {
		return principal[i+1:]
	}
	return principal
}

// resolve finds the quota of the kind that applies to user and client ID,
// in Kafka's order (ClientQuotaManager, DefaultQuotaCallback): user and
// client ID, user and default client, user, default user and client ID,
// default user and default client, default user, client ID, default client.
// The sensor is shared by every client the quota entity's kind covers:
// per user and client ID for the first, second, fourth and fifth, per user
// for the third and sixth, per client ID for the last two.
func (x *quotaIndex) resolve(kind QuotaKind, user, clientID string) (limit float64, id sensorID, ok bool) {
	u, c := &user, &clientID
	type level struct {
		user, client *string
		hasUser      bool
		hasClient    bool
	}
	levels := [...]level{
		{u, c, true, true}, {u, nil, true, true}, {u, nil, true, false},
		{nil, c, true, true}, {nil, nil, true, true}, {nil, nil, true, false},
		{nil, c, false, true}, {nil, nil, false, true},
	}
	for _, l := range levels {
		var e QuotaEntity
		if l.hasClient {
			e = append(e, QuotaEntityPart{Type: QuotaEntityClientID, Name: l.client})
		}
		if l.hasUser {
			e = append(e, QuotaEntityPart{Type: QuotaEntityUser, Name: l.user})
		}
		v, found := x.value(kind, e)
		if !found {
			continue
		}
		id = sensorID{kind: kind}
		if l.hasUser {
			id.user = user
		}
		if l.hasClient {
			id.clientID = clientID
		}
		return v, id, true
	}
	return 0, sensorID{}, false
}

type sensorID struct {
	kind           QuotaKind
	user, clientID string
}

// QuotaSensor is the rate of one quota entity's clients, with its limit.
type QuotaSensor struct {
	mu       sync.Mutex
	rate     *sampledRate
	limit    float64
	lastMs   int64
	kind     QuotaKind
	maxThrMs int64 // bound of a throttle; 0 for none
}

// Sensor returns the sensor of the kind for the principal and client ID,
// nil when no quota of the kind applies to them.
func (q *Quotas) Sensor(kind QuotaKind, principal, clientID string, now time.Time) *QuotaSensor {
	limit, id, ok := q.idx.Load().resolve(kind, QuotaUser(principal), clientID)
	if !ok {
		return nil
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	s := q.mu.sensors[id]
	if s == nil {
		if len(q.mu.sensors) >= q.cfg.MaxSensors {
			q.dropIdleLocked(now.UnixMilli())
		}
		s = &QuotaSensor{rate: newSampledRate(q.cfg.WindowNum, q.cfg.WindowSize), kind: kind}
		if kind == QuotaKindRequest {
			// Kafka ClientRequestQuotaManager bounds a request quota's
			// throttle to one sample window.
			s.maxThrMs = q.cfg.WindowSize.Milliseconds()
		}
		q.mu.sensors[id] = s
	}
	s.mu.Lock()
	s.limit = limit
	s.mu.Unlock()
	return s
}

// dropIdleLocked forgets the sensors that measured nothing for a whole
// window, or, if none, the oldest half. A connection that still holds a
// dropped sensor keeps using it until the quotas change.
func (q *Quotas) dropIdleLocked(nowMs int64) {
	window := int64(q.cfg.WindowNum) * q.cfg.WindowSize.Milliseconds()
	for id, s := range q.mu.sensors {
		s.mu.Lock()
		idle := nowMs-s.lastMs >= window
		s.mu.Unlock()
		if idle {
			delete(q.mu.sensors, id)
		}
	}
	if len(q.mu.sensors) < q.cfg.MaxSensors {
		return
	}
	n := 0
	for id := range q.mu.sensors {
		if n >= len(q.mu.sensors)/2 {
			break
		}
		delete(q.mu.sensors, id)
		n++
	}
}

// Record adds value (bytes, or request-percentage units) at now and
// returns how long the client must be throttled: zero within the quota,
// else Kafka's throttle time (the value is recorded either way, as Kafka's
// Sensor.record does before it checks the quota).
func (s *QuotaSensor) Record(value float64, now time.Time) time.Duration {
	if s == nil {
		return 0
	}
	nowMs := now.UnixMilli()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.lastMs = nowMs
	s.rate.record(value, nowMs)
	rate := s.rate.perSecond(nowMs)
	ms := s.rate.throttleMs(rate, s.limit, nowMs)
	if s.maxThrMs > 0 {
		ms = min(ms, s.maxThrMs)
	}
	return time.Duration(ms) * time.Millisecond
}

// Unrecord takes back a value recorded at now (Kafka unrecordQuotaSensor:
// a throttled fetch returns no data, so its bytes do not count).
func (s *QuotaSensor) Unrecord(value float64, now time.Time) {
	if s == nil {
		return
	}
	s.mu.Lock()
	s.rate.record(-value, now.UnixMilli())
	s.mu.Unlock()
}

// MaxValueInWindow is the most the quota allows within the measured window
// (Kafka getMaxValueInQuotaWindow: limit x (windowNum-1) x windowSize): a
// fetch never asks for more.
func (s *QuotaSensor) MaxValueInWindow() float64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.limit * float64(s.rate.num-1) * float64(s.rate.windowMs) / 1000
}

// RequestPercentage converts request time into request_percentage units
// (Kafka nanosToPercentage: percent of one second).
func RequestPercentage(d time.Duration) float64 {
	return float64(d) * 100 / float64(time.Second)
}
