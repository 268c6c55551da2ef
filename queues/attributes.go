package queues

import (
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
)

// Limits of the queue API (NATIVE-QUEUE.md §3.4, §3.5).
const (
	VisibilityMinMs        = 1000
	VisibilityMaxMs        = 12 * 3600 * 1000 // also the longest total lease
	MaxReceivesMax         = 1000
	RetentionMinMs         = 60000
	RetentionMaxMs         = 31536000000
	MessageBytesMax        = 16 << 20
	DedupWindowMaxMs       = 604800000
	PriorityLevelsMax      = 16
	PartitionsMax          = 64
	MaxInflightMax         = 10000000
	ReceiveWaitMaxMs       = 300000
	BatchMessagesMax       = 1000
	ReceiveMessagesMax     = 1000
	ReceiveBytesMin        = 1 << 10
	ReceiveBytesMax        = 64 << 20
	ReceiveBytesDefault    = 8 << 20
	HeadersMax             = 64
	HeaderKeyMax           = 256
	HeaderValueMax         = 8 << 10
	KeyMax                 = 1 << 10
	DedupIDMax             = 128
	RequestIDMax           = 128
	ConsumerMax            = 128
	ReasonMax              = 1024
	NameMax                = 249
	SendBytesMax           = 16 << 20
	RedriveRateMax         = 10000
	RedriveRateDefault     = 500
	redriveStepMax         = 500
	dlqRetentionDefaultMs  = 14 * 24 * 3600 * 1000
	queueTopicMessageBytes = SendBytesMax + 1<<20 // the queue topic's max.message.bytes
)

// Backoff is the delay of a nack without an explicit delay:
// min(max, initial·multiplier^(deliveries−1))·(1±jitter).
type Backoff struct {
	InitialMs  int64   `json:"initial_ms"`
	Multiplier float64 `json:"multiplier"`
	MaxMs      int64   `json:"max_ms"`
	Jitter     float64 `json:"jitter"`
}

// delay returns the backoff after the given number of deliveries.
func (b Backoff) delay(deliveries uint32, rnd *rand.Rand) int64 {
	d := float64(b.InitialMs) * math.Pow(b.Multiplier, float64(max(deliveries, 1)-1))
	d = math.Min(d, float64(b.MaxMs))
	if b.Jitter > 0 && rnd != nil {
		d *= 1 + b.Jitter*(2*rnd.Float64()-1)
	}
	return int64(max(d, 0))
}

// Attributes are a queue's settings. Every field has a default
// (DefaultAttributes) and a range checked by validate.
type Attributes struct {
	Partitions          int32   `json:"partitions"`
	VisibilityTimeoutMs int64   `json:"visibility_timeout_ms"`
	MaxReceives         int32   `json:"max_receives"`
	MaxExpiries         int32   `json:"max_expiries"`
	DeadLetter          string  `json:"dead_letter"`
	OnExpire            string  `json:"on_expire"`
	DefaultDelayMs      int64   `json:"default_delay_ms"`
	RetentionMs         int64   `json:"retention_ms"`
	MaxMessageBytes     int64   `json:"max_message_bytes"`
	DedupWindowMs       int64   `json:"dedup_window_ms"`
	PriorityLevels      int32   `json:"priority_levels"`
	Backoff             Backoff `json:"backoff"`
	ExpiryBackoffMs     int64   `json:"expiry_backoff_ms"`
	RetainAckedMs       int64   `json:"retain_acked_ms"`
	MaxInflight         int64   `json:"max_inflight"`
	ReceiveWaitMaxMs    int64   `json:"receive_wait_max_ms"`
	FIFO                bool    `json:"fifo"`
	// ContentDedup deduplicates messages without a dedup_id on the
	// SHA-256 of their body.
	ContentDedup bool `json:"content_dedup"`
	// DedupConflict says what a duplicate dedup_id with another body gets:
	// accept (the duplicate answer) or reject (item error dedup_conflict).
	DedupConflict string `json:"dedup_conflict"`
	// DedupScope is window (a dedup id is remembered for dedup_window_ms)
	// or in_queue (also while the original is queued: not acked, dead or
	// deleted, whichever ends later).
	DedupScope string `json:"dedup_scope"`
	// MaxUnclaimedAgeMs dead-letters (reason unclaimed) a message that has
	// been ready this long without ever being received; 0 = off.
	MaxUnclaimedAgeMs int64 `json:"max_unclaimed_age_ms"`
}

// Values of dedup_conflict and dedup_scope.
const (
	DedupConflictAccept = "accept"
	DedupConflictReject = "reject"
	DedupScopeWindow    = "window"
	DedupScopeInQueue   = "in_queue"
)

// normalize fills the attributes a catalog row written before they existed
// lacks (the zero value of a string enum is not a valid value).
func (a *Attributes) normalize() {
	if a.DedupConflict == "" {
		a.DedupConflict = DedupConflictAccept
	}
	if a.DedupScope == "" {
		a.DedupScope = DedupScopeWindow
	}
}

// dedupEnabled says whether sends are deduplicated at all: a window, or
// the in_queue scope (which dedups while the original is queued even with
// a zero window).
func (a *Attributes) dedupEnabled() bool {
	return a.DedupWindowMs > 0 || a.DedupScope == DedupScopeInQueue
}

// DefaultAttributes are the attributes of a queue created without any.
func DefaultAttributes() Attributes {
	return Attributes{
		Partitions:          1,
		VisibilityTimeoutMs: 30000,
		MaxReceives:         5,
		MaxExpiries:         0,
		DeadLetter:          "auto",
		OnExpire:            "drop",
		RetentionMs:         345600000,
		MaxMessageBytes:     1 << 20,
		DedupWindowMs:       300000,
		PriorityLevels:      1,
		Backoff:             Backoff{InitialMs: 1000, Multiplier: 2, MaxMs: 300000, Jitter: 0.1},
		MaxInflight:         100000,
		ReceiveWaitMaxMs:    20000,
		DedupConflict:       DedupConflictAccept,
		DedupScope:          DedupScopeWindow,
	}
}

// dlqAttributes are the attributes of an automatically created DLQ.
func dlqAttributes(src Attributes) Attributes {
	a := DefaultAttributes()
	a.DeadLetter = "none"
	a.MaxReceives = 0
	a.RetentionMs = dlqRetentionDefaultMs
	a.MaxMessageBytes = max(src.MaxMessageBytes+16<<10, a.MaxMessageBytes) // room for the dead-letter headers
	a.MaxMessageBytes = min(a.MaxMessageBytes, MessageBytesMax)
	return a
}

// AttributesPatch is a create or update request: nil fields keep the
// current (or default) value.
type AttributesPatch struct {
	Partitions          *int32
	VisibilityTimeoutMs *int64
	MaxReceives         *int32
	MaxExpiries         *int32
	DeadLetter          *string
	OnExpire            *string
	DefaultDelayMs      *int64
	RetentionMs         *int64
	MaxMessageBytes     *int64
	DedupWindowMs       *int64
	PriorityLevels      *int32
	Backoff             *BackoffPatch
	ExpiryBackoffMs     *int64
	RetainAckedMs       *int64
	MaxInflight         *int64
	ReceiveWaitMaxMs    *int64
	FIFO                *bool
	ContentDedup        *bool
	DedupConflict       *string
	DedupScope          *string
	MaxUnclaimedAgeMs   *int64
}

// BackoffPatch changes some fields of a Backoff.
type BackoffPatch struct {
	InitialMs  *int64
	Multiplier *float64
	MaxMs      *int64
	Jitter     *float64
}

// apply returns a with the patch's fields set.
func (p *AttributesPatch) apply(a Attributes) Attributes {
	if p == nil {
		return a
	}
	setI32 := func(dst *int32, v *int32) {
		if v != nil {
			*dst = *v
		}
	}
	setI64 := func(dst *int64, v *int64) {
		if v != nil {
			*dst = *v
		}
	}
	setI32(&a.Partitions, p.Partitions)
	setI64(&a.VisibilityTimeoutMs, p.VisibilityTimeoutMs)
	setI32(&a.MaxReceives, p.MaxReceives)
	setI32(&a.MaxExpiries, p.MaxExpiries)
	if p.DeadLetter != nil {
		a.DeadLetter = *p.DeadLetter
	}
	if p.OnExpire != nil {
		a.OnExpire = *p.OnExpire
	}
	setI64(&a.DefaultDelayMs, p.DefaultDelayMs)
	setI64(&a.RetentionMs, p.RetentionMs)
	setI64(&a.MaxMessageBytes, p.MaxMessageBytes)
	setI64(&a.DedupWindowMs, p.DedupWindowMs)
	setI32(&a.PriorityLevels, p.PriorityLevels)
	if b := p.Backoff; b != nil {
		setI64(&a.Backoff.InitialMs, b.InitialMs)
		if b.Multiplier != nil {
			a.Backoff.Multiplier = *b.Multiplier
		}
		setI64(&a.Backoff.MaxMs, b.MaxMs)
		if b.Jitter != nil {
			a.Backoff.Jitter = *b.Jitter
		}
	}
	setI64(&a.ExpiryBackoffMs, p.ExpiryBackoffMs)
	setI64(&a.RetainAckedMs, p.RetainAckedMs)
	setI64(&a.MaxInflight, p.MaxInflight)
	setI64(&a.ReceiveWaitMaxMs, p.ReceiveWaitMaxMs)
	if p.FIFO != nil {
		a.FIFO = *p.FIFO
	}
	if p.ContentDedup != nil {
		a.ContentDedup = *p.ContentDedup
	}
	if p.DedupConflict != nil {
		a.DedupConflict = *p.DedupConflict
	}
	if p.DedupScope != nil {
		a.DedupScope = *p.DedupScope
	}
	setI64(&a.MaxUnclaimedAgeMs, p.MaxUnclaimedAgeMs)
	return a
}

// validate checks every attribute's range; dead_letter targets are
// checked by the engine.
func (a *Attributes) validate() *Error {
	checks := []struct {
		field    string
		v        int64
		min, max int64
	}{
		{"partitions", int64(a.Partitions), 1, PartitionsMax},
		{"visibility_timeout_ms", a.VisibilityTimeoutMs, VisibilityMinMs, VisibilityMaxMs},
		{"max_receives", int64(a.MaxReceives), 0, MaxReceivesMax},
		{"max_expiries", int64(a.MaxExpiries), 0, MaxReceivesMax},
		{"retention_ms", a.RetentionMs, 0, RetentionMaxMs},
		{"max_message_bytes", a.MaxMessageBytes, 1, MessageBytesMax},
		{"dedup_window_ms", a.DedupWindowMs, 0, DedupWindowMaxMs},
		{"priority_levels", int64(a.PriorityLevels), 1, PriorityLevelsMax},
		{"backoff.initial_ms", a.Backoff.InitialMs, 0, VisibilityMaxMs},
		{"backoff.max_ms", a.Backoff.MaxMs, 0, VisibilityMaxMs},
		{"expiry_backoff_ms", a.ExpiryBackoffMs, 0, VisibilityMaxMs},
		{"retain_acked_ms", a.RetainAckedMs, 0, DedupWindowMaxMs},
		{"max_inflight", a.MaxInflight, 1, MaxInflightMax},
		{"receive_wait_max_ms", a.ReceiveWaitMaxMs, 0, ReceiveWaitMaxMs},
	}
	for _, c := range checks {
		if c.v < c.min || c.v > c.max {
			return rangeErr(c.field, c.min, c.max)
		}
	}
	if a.RetentionMs != 0 && a.RetentionMs < RetentionMinMs {
		e := rangeErr("retention_ms", RetentionMinMs, RetentionMaxMs)
		e.Message += " (or 0 for forever)"
		return e
	}
	maxDelay := a.RetentionMs
	if maxDelay == 0 {
		maxDelay = RetentionMaxMs
	}
	if a.DefaultDelayMs < 0 || a.DefaultDelayMs > maxDelay {
		return rangeErr("default_delay_ms", 0, maxDelay)
	}
	if a.MaxUnclaimedAgeMs < 0 || a.MaxUnclaimedAgeMs > maxDelay {
		return rangeErr("max_unclaimed_age_ms", 0, maxDelay)
	}
	if a.Backoff.Multiplier < 1 || a.Backoff.Multiplier > 10 || math.IsNaN(a.Backoff.Multiplier) {
		return withField(errf(CodeOutOfRange, "backoff.multiplier must be between 1 and 10"), "backoff.multiplier")
	}
	if a.Backoff.Jitter < 0 || a.Backoff.Jitter > 1 || math.IsNaN(a.Backoff.Jitter) {
		return withField(errf(CodeOutOfRange, "backoff.jitter must be between 0 and 1"), "backoff.jitter")
	}
	if a.OnExpire != "drop" && a.OnExpire != "dead_letter" {
		return withField(errf(CodeInvalidEnum, "on_expire is %q; it must be drop or dead_letter", a.OnExpire), "on_expire")
	}
	if a.DedupConflict != DedupConflictAccept && a.DedupConflict != DedupConflictReject {
		return withField(errf(CodeInvalidEnum, "dedup_conflict is %q; it must be accept or reject", a.DedupConflict), "dedup_conflict")
	}
	if a.DedupScope != DedupScopeWindow && a.DedupScope != DedupScopeInQueue {
		return withField(errf(CodeInvalidEnum, "dedup_scope is %q; it must be window or in_queue", a.DedupScope), "dedup_scope")
	}
	if a.DeadLetter == "" {
		return withField(errf(CodeInvalidEnum, "dead_letter must be auto, none or the name of a queue"), "dead_letter")
	}
	if a.FIFO {
		return withField(errf(CodeFIFODisabled, "FIFO queues are not supported yet"), "fifo")
	}
	return nil
}

// diff lists the attributes that differ between a and b.
func (a Attributes) diff(b Attributes) []string {
	var out []string
	if a.Partitions != b.Partitions {
		out = append(out, "partitions")
	}
	if a.VisibilityTimeoutMs != b.VisibilityTimeoutMs {
		out = append(out, "visibility_timeout_ms")
	}
	if a.MaxReceives != b.MaxReceives {
		out = append(out, "max_receives")
	}
	if a.MaxExpiries != b.MaxExpiries {
		out = append(out, "max_expiries")
	}
	if a.DeadLetter != b.DeadLetter {
		out = append(out, "dead_letter")
	}
	if a.OnExpire != b.OnExpire {
		out = append(out, "on_expire")
	}
	if a.DefaultDelayMs != b.DefaultDelayMs {
		out = append(out, "default_delay_ms")
	}
	if a.RetentionMs != b.RetentionMs {
		out = append(out, "retention_ms")
	}
	if a.MaxMessageBytes != b.MaxMessageBytes {
		out = append(out, "max_message_bytes")
	}
	if a.DedupWindowMs != b.DedupWindowMs {
		out = append(out, "dedup_window_ms")
	}
	if a.PriorityLevels != b.PriorityLevels {
		out = append(out, "priority_levels")
	}
	if a.Backoff != b.Backoff {
		out = append(out, "backoff")
	}
	if a.ExpiryBackoffMs != b.ExpiryBackoffMs {
		out = append(out, "expiry_backoff_ms")
	}
	if a.RetainAckedMs != b.RetainAckedMs {
		out = append(out, "retain_acked_ms")
	}
	if a.MaxInflight != b.MaxInflight {
		out = append(out, "max_inflight")
	}
	if a.ReceiveWaitMaxMs != b.ReceiveWaitMaxMs {
		out = append(out, "receive_wait_max_ms")
	}
	if a.FIFO != b.FIFO {
		out = append(out, "fifo")
	}
	if a.ContentDedup != b.ContentDedup {
		out = append(out, "content_dedup")
	}
	if a.DedupConflict != b.DedupConflict {
		out = append(out, "dedup_conflict")
	}
	if a.DedupScope != b.DedupScope {
		out = append(out, "dedup_scope")
	}
	if a.MaxUnclaimedAgeMs != b.MaxUnclaimedAgeMs {
		out = append(out, "max_unclaimed_age_ms")
	}
	return out
}

// ValidateName applies the queue name rules: Kafka's topic name rules,
// and no "__" (reserved for internal topics).
func ValidateName(name string) *Error {
	if name == "" || name == "." || name == ".." || len(name) > NameMax {
		return withField(errf(CodeInvalidName, "queue name %q must be 1 to %d characters of [A-Za-z0-9._-] and not . or ..", name, NameMax), "name")
	}
	for _, c := range []byte(name) {
		ok := c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-'
		if !ok {
			return withField(errf(CodeInvalidName, "queue name %q has a character outside [A-Za-z0-9._-]", name), "name")
		}
	}
	if strings.Contains(name, "__") {
		return withField(errf(CodeReservedName, "queue name %q contains \"__\", which is reserved for internal topics", name), "name")
	}
	return nil
}

func fmtID(m msgKey) string { return fmt.Sprintf("%d:%d", m.part, m.off) }

// parseID parses a message id "<partition>:<offset>".
func parseID(id string) (msgKey, *Error) {
	var m msgKey
	i := strings.IndexByte(id, ':')
	if i <= 0 || i == len(id)-1 || len(id) > 32 {
		return m, errf(CodeInvalidID, "message id %q is not <partition>:<offset>", id)
	}
	var p, o int64
	if _, err := fmt.Sscanf(id, "%d:%d", &p, &o); err != nil || p < 0 || p >= PartitionsMax || o < 0 || fmt.Sprintf("%d:%d", p, o) != id {
		return m, errf(CodeInvalidID, "message id %q is not <partition>:<offset>", id)
	}
	return msgKey{part: int32(p), off: o}, nil
}
