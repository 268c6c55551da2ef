package auth

import (
	"encoding/json"
	"fmt"
	"sort"
	"sync"

	"github.com/vibemq/broker/pebblestore"
)

// A credential row (pebblestore.ScramCredentialKey) holds the JSON of a
// Credential: {"salt", "iterations", "stored_key", "server_key"}, byte
// strings in base64. Kafka keeps the same four values (ScramCredential).

// MaxUserNameBytes bounds a user name (it is a key suffix and a log field).
const MaxUserNameBytes = 256

// Store keeps the SCRAM credentials: every row is read at Open and cached;
// changes are written durably before they are visible.
//
// writeMu serializes Apply (check, durable write, cache update), so the
// cache cannot diverge from the store; mu guards the cache only and is
// never held across the Pebble sync (STYLE rule 6). Order: writeMu before
// mu; both are leaves towards every other lock.
type Store struct {
	store   *pebblestore.Store
	writeMu sync.Mutex
	mu      struct {
		sync.Mutex
		// users[name][mechanism]
		users map[string]map[Mechanism]Credential
	}
}

// Open reads every credential row.
func Open(store *pebblestore.Store) (*Store, error) {
	s := &Store{store: store}
	s.mu.users = map[string]map[Mechanism]Credential{}
	prefix := []byte{pebblestore.PrefixScramCredential}
	it, err := store.NewIter(prefix, pebblestore.PrefixEnd(prefix))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrStorage, err)
	}
	defer it.Close()
	for ok := it.First(); ok; ok = it.Next() {
		k := it.Key()
		if len(k) < 2 {
			return nil, fmt.Errorf("auth: credential key %x is too short: %w", k, pebblestore.ErrCorruption)
		}
		m, user := Mechanism(k[1]), string(k[2:])
		v, err := it.Value()
		if err != nil {
			return nil, fmt.Errorf("%w: %v", ErrStorage, err)
		}
		var c Credential
		if err := json.Unmarshal(v, &c); err != nil || !m.valid() {
			return nil, fmt.Errorf("auth: credential row %x cannot be read: %w", k, pebblestore.ErrCorruption)
		}
		if s.mu.users[user] == nil {
			s.mu.users[user] = map[Mechanism]Credential{}
		}
		s.mu.users[user][m] = c
	}
	return s, nil
}

// Lookup returns the user's credential for the mechanism.
func (s *Store) Lookup(user string, m Mechanism) (Credential, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.mu.users[user][m]
	return c, ok
}

// UserCredentials is one user's mechanisms and iteration counts (what
// DescribeUserScramCredentials reports).
type UserCredentials struct {
	User       string
	Mechanisms map[Mechanism]int // iterations
}

// Describe returns the users' mechanisms, every user when users is empty,
// sorted by name; a named user without credentials is absent.
func (s *Store) Describe(users []string) []UserCredentials {
	s.mu.Lock()
	defer s.mu.Unlock()
	var names []string
	if len(users) == 0 {
		for u := range s.mu.users {
			names = append(names, u)
		}
	} else {
		names = users
	}
	sort.Strings(names)
	var out []UserCredentials
	for _, u := range names {
		ms, ok := s.mu.users[u]
		if !ok {
			continue
		}
		uc := UserCredentials{User: u, Mechanisms: map[Mechanism]int{}}
		for m, c := range ms {
			uc.Mechanisms[m] = c.Iterations
		}
		out = append(out, uc)
	}
	return out
}

// Change is one credential change: a Credential to set, or a deletion
// when Delete is true.
type Change struct {
	User       string
	Mechanism  Mechanism
	Delete     bool
	Credential Credential
}

// CheckUser says what is wrong with a user name, or nil.
func CheckUser(user string) error {
	switch {
	case user == "":
		return fmt.Errorf("%w: the user name is empty", ErrUnacceptableCredential)
	case len(user) > MaxUserNameBytes:
		return fmt.Errorf("%w: the user name is longer than %d bytes", ErrUnacceptableCredential, MaxUserNameBytes)
	}
	return nil
}

// Apply writes the changes in one durable batch, all or nothing. A
// deletion of a credential that does not exist fails with ErrNoCredential
// and writes nothing.
func (s *Store) Apply(changes []Change) error {
	s.writeMu.Lock()
	defer s.writeMu.Unlock()
	b := s.store.NewBatch()
	committed := false
	defer func() {
		if !committed {
			b.Close()
		}
	}()
	for _, ch := range changes {
		if err := CheckUser(ch.User); err != nil {
			return err
		}
		if !ch.Mechanism.valid() {
			return ErrUnknownMechanism
		}
		key := pebblestore.ScramCredentialKey(byte(ch.Mechanism), ch.User)
		if ch.Delete {
			// Only Apply changes the cache, and writeMu is held.
			if _, ok := s.Lookup(ch.User, ch.Mechanism); !ok {
				return fmt.Errorf("%w: user %q has no %s credential", ErrNoCredential, ch.User, ch.Mechanism)
			}
			b.Delete(key)
			continue
		}
		v, err := json.Marshal(ch.Credential)
		if err != nil {
			return fmt.Errorf("auth: encoding a credential: %v", err)
		}
		b.Set(key, v)
	}
	// Credentials are rare, small writes: committed synchronously (the
	// store's durability setting decides the fsync) before the cache
	// shows them.
	committed = true
	if err := b.Commit(); err != nil {
		return fmt.Errorf("%w: %v", ErrStorage, err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, ch := range changes {
		if ch.Delete {
			delete(s.mu.users[ch.User], ch.Mechanism)
			if len(s.mu.users[ch.User]) == 0 {
				delete(s.mu.users, ch.User)
			}
			continue
		}
		if s.mu.users[ch.User] == nil {
			s.mu.users[ch.User] = map[Mechanism]Credential{}
		}
		s.mu.users[ch.User][ch.Mechanism] = ch.Credential
	}
	return nil
}

// HasUsers reports whether any credential exists.
func (s *Store) HasUsers() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.mu.users) > 0
}
