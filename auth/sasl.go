package auth

import (
	"bytes"
	"errors"
	"fmt"
)

// SASL mechanism names, as clients send them in SaslHandshake.
const (
	MechanismPlain = "PLAIN"
)

// ErrAuthenticationFailed is the class of every failed SASL exchange: the
// client gets SASL_AUTHENTICATION_FAILED and its connection is closed.
// The wrapped text says why, without a secret.
var ErrAuthenticationFailed = errors.New("authentication failed")

// MaxTokenBytes bounds one SASL token (Kafka sasl.server.max.receive.size).
const MaxTokenBytes = 512 << 10

// Session is the server side of one SASL exchange.
type Session interface {
	// Step takes the client's next token and returns the server's reply.
	// done is true when the exchange succeeded; an error is a failure
	// (errors.Is ErrAuthenticationFailed), after which the session is
	// finished.
	Step(token []byte) (reply []byte, done bool, err error)
	// User is the user name the client claimed, "" before it said one.
	User() string
}

// StartSession begins an exchange of the named mechanism against the
// credential store. ok is false for a mechanism the broker does not know.
func StartSession(store *Store, mechanism string) (Session, bool) {
	switch mechanism {
	case MechanismPlain:
		return &plainSession{store: store}, true
	}
	m, ok := ParseMechanism(mechanism)
	if !ok {
		return nil, false
	}
	return newScramSession(store, m), true
}

func failed(format string, args ...any) error {
	return fmt.Errorf("%w: %s", ErrAuthenticationFailed, fmt.Sprintf(format, args...))
}

// plainSession is RFC 4616: one message "authzid NUL authcid NUL passwd",
// checked against the user's stored SCRAM keys.
type plainSession struct {
	store *Store
	user  string
	done  bool
}

func (p *plainSession) User() string { return p.user }

func (p *plainSession) Step(token []byte) ([]byte, bool, error) {
	if p.done {
		return nil, false, failed("the PLAIN exchange has already ended")
	}
	p.done = true
	parts := bytes.Split(token, []byte{0})
	if len(parts) != 3 {
		return nil, false, failed("the PLAIN message is not authzid NUL user NUL password")
	}
	authz, user, password := string(parts[0]), string(parts[1]), string(parts[2])
	if len(user) > MaxUserNameBytes {
		return nil, false, failed("the user name is longer than %d bytes", MaxUserNameBytes)
	}
	p.user = user
	if user == "" || password == "" {
		return nil, false, failed("the PLAIN message has an empty user name or password")
	}
	if authz != "" && authz != user {
		// Kafka PlainSaslServer: "Authentication failed: Client requested
		// an authorization id that is different from username".
		return nil, false, failed("the authorization id differs from the user name")
	}
	if _, ok := verifyPassword(p.store, user, password); !ok {
		return nil, false, failed("invalid credentials")
	}
	return nil, true, nil
}

// dummyCredential is verified against for unknown users (plainSession).
var dummyCredential = Credential{Salt: make([]byte, saltBytes), Iterations: DefaultIterations, StoredKey: make([]byte, 64)}

// scramSession is the server side of RFC 5802: the client-first message,
// then the client-final message with the proof (scram_server.go).
type scramSession struct {
	store *Store
	m     Mechanism
	step  int
	user  string
	// From the first exchange: what the final one is checked against.
	gs2Header   string
	clientBare  string
	serverFirst string
	nonce       string
	cred        Credential
}

func newScramSession(store *Store, m Mechanism) *scramSession {
	return &scramSession{store: store, m: m}
}

func (s *scramSession) User() string { return s.user }

func (s *scramSession) Step(token []byte) ([]byte, bool, error) {
	s.step++
	switch s.step {
	case 1:
		reply, err := s.clientFirst(string(token))
		return []byte(reply), false, err
	case 2:
		reply, err := s.clientFinal(string(token))
		if err != nil {
			return nil, false, err
		}
		return []byte(reply), true, nil
	}
	return nil, false, failed("the SCRAM exchange has already ended")
}
