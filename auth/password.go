package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"runtime"
	"sync"
	"time"
)

// verifyPassword checks password against the user's stored SCRAM keys
// (SHA-512 credential first, else SHA-256) and returns the StoredKey it
// matched. An unknown user costs the same key derivation as a wrong
// password, so the timing does not tell which user names exist.
func verifyPassword(store *Store, user, password string) ([]byte, bool) {
	for _, m := range []Mechanism{ScramSHA512, ScramSHA256} {
		if c, ok := store.Lookup(user, m); ok {
			return c.StoredKey, c.Verify(m, password)
		}
	}
	dummyCredential.Verify(ScramSHA512, password)
	return nil, false
}

// currentStoredKey is the StoredKey verifyPassword would match for user.
func currentStoredKey(store *Store, user string) []byte {
	for _, m := range []Mechanism{ScramSHA512, ScramSHA256} {
		if c, ok := store.Lookup(user, m); ok {
			return c.StoredKey
		}
	}
	return nil
}

// Default bounds of a PasswordChecker's cache.
const (
	DefaultPasswordCacheTTL     = 30 * time.Second
	DefaultPasswordCacheEntries = 10000
)

// PasswordChecker verifies user names and passwords (HTTP Basic) against
// the SCRAM credentials, and remembers a success for TTL so that each
// request of a client does not pay the key derivation (PBKDF2 with 4096
// or more iterations: milliseconds; BenchmarkPasswordChecker).
//
// A cache entry holds an HMAC of the password under a key made at start
// (never the password) and the StoredKey it was checked against: a changed
// or deleted credential misses the cache at once. The cache keeps at most
// MaxEntries users; when full, expired entries go first, then any.
//
// At most half the CPUs derive keys at once (derivations queue for a
// slot): a flood of wrong passwords on many connections costs the broker
// at most half its cores, however many requests are waiting.
type PasswordChecker struct {
	store      *Store
	ttl        time.Duration
	maxEntries int
	macKey     []byte
	derive     chan struct{}

	mu struct {
		sync.Mutex
		byUser map[string]passwordEntry
	}
}

type passwordEntry struct {
	mac       []byte
	storedKey []byte
	expires   time.Time
}

// NewPasswordChecker checks against store; zero bounds take the defaults.
func NewPasswordChecker(store *Store, ttl time.Duration, maxEntries int) *PasswordChecker {
	if ttl <= 0 {
		ttl = DefaultPasswordCacheTTL
	}
	if maxEntries <= 0 {
		maxEntries = DefaultPasswordCacheEntries
	}
	p := &PasswordChecker{store: store, ttl: ttl, maxEntries: maxEntries, macKey: make([]byte, 32),
		derive: make(chan struct{}, max(1, runtime.GOMAXPROCS(0)/2))}
	_, _ = rand.Read(p.macKey)
	p.mu.byUser = map[string]passwordEntry{}
	return p
}

func (p *PasswordChecker) mac(user, password string) []byte {
	h := hmac.New(sha256.New, p.macKey)
	h.Write([]byte(user))
	h.Write([]byte{0})
	h.Write([]byte(password))
	return h.Sum(nil)
}

// Check reports whether password is user's, at now.
func (p *PasswordChecker) Check(user, password string, now time.Time) bool {
	if user == "" || password == "" || len(user) > MaxUserNameBytes {
		return false
	}
	mac := p.mac(user, password)
	current := currentStoredKey(p.store, user)
	p.mu.Lock()
	e, ok := p.mu.byUser[user]
	p.mu.Unlock()
	if ok && now.Before(e.expires) && current != nil && hmac.Equal(e.storedKey, current) && hmac.Equal(e.mac, mac) {
		return true
	}
	p.derive <- struct{}{}
	storedKey, ok := verifyPassword(p.store, user, password)
	<-p.derive
	if !ok {
		return false
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if _, exists := p.mu.byUser[user]; !exists && len(p.mu.byUser) >= p.maxEntries {
		p.evictLocked(now)
	}
	p.mu.byUser[user] = passwordEntry{mac: mac, storedKey: storedKey, expires: now.Add(p.ttl)}
	return true
}

// StillValid reports whether user's credential is still the one whose
// StoredKey was stamp (a login session ends when its password changes).
func (p *PasswordChecker) StillValid(user string, stamp []byte) bool {
	current := currentStoredKey(p.store, user)
	return current != nil && hmac.Equal(current, stamp)
}

// Stamp is the StoredKey user's password is checked against now.
func (p *PasswordChecker) Stamp(user string) []byte { return currentStoredKey(p.store, user) }

// evictLocked drops expired entries, and if none expired, one entry.
//
// REQUIRES: p.mu held.
func (p *PasswordChecker) evictLocked(now time.Time) {
	for u, e := range p.mu.byUser {
		if !now.Before(e.expires) {
			delete(p.mu.byUser, u)
		}
	}
	if len(p.mu.byUser) < p.maxEntries {
		return
	}
	for u := range p.mu.byUser {
		delete(p.mu.byUser, u)
		return
	}
}

// Len is the number of cached users.
func (p *PasswordChecker) Len() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.mu.byUser)
}
