// Package auth holds the broker's security state and decisions that know
// no wire format: SCRAM credentials (RFC 5802, RFC 7677) stored salted in
// Pebble, the server side of the SASL mechanisms PLAIN (RFC 4616) and
// SCRAM-SHA-256/512, principals (Kafka's "User:name") and the mapping of
// TLS certificate subjects to principals (Kafka ssl.principal.mapping.rules),
// and the slowing of repeated authentication failures. kafkaproto speaks
// SaslHandshake/SaslAuthenticate over it; the HTTP API can check the same
// credentials later.
package auth

import (
	"crypto/hmac"
	"crypto/pbkdf2"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"errors"
	"fmt"
	"hash"
)

// Mechanism is a SCRAM mechanism, with Kafka's ScramMechanism codes
// (DescribeUserScramCredentials, AlterUserScramCredentials).
type Mechanism int8

const (
	ScramSHA256 Mechanism = 1
	ScramSHA512 Mechanism = 2
)

// Mechanisms lists the SCRAM mechanisms, in code order.
var Mechanisms = []Mechanism{ScramSHA256, ScramSHA512}

// Iteration bounds: RFC 7677 asks for at least 4096; Kafka refuses more
// than 16384 (ScramMechanism.maxIterations) with UNACCEPTABLE_CREDENTIAL.
const (
	MinIterations     = 4096
	MaxIterations     = 16384
	DefaultIterations = 8192
	// saltBytes is the length of the salts the broker makes.
	saltBytes = 32
)

// Errors of credential changes, mapped to Kafka codes at the edge.
var (
	ErrUnknownMechanism       = errors.New("auth: unknown SCRAM mechanism")
	ErrUnacceptableCredential = errors.New("auth: unacceptable credential")
	ErrNoCredential           = errors.New("auth: no such credential")
	ErrStorage                = errors.New("auth: storage failure")
)

// String is the SASL mechanism name.
func (m Mechanism) String() string {
	switch m {
	case ScramSHA256:
		return "SCRAM-SHA-256"
	case ScramSHA512:
		return "SCRAM-SHA-512"
	}
	return fmt.Sprintf("SCRAM-UNKNOWN(%d)", int8(m))
}

// ParseMechanism parses a SCRAM mechanism name.
func ParseMechanism(name string) (Mechanism, bool) {
	switch name {
	case "SCRAM-SHA-256":
		return ScramSHA256, true
	case "SCRAM-SHA-512":
		return ScramSHA512, true
	}
	return 0, false
}

func (m Mechanism) valid() bool { return m == ScramSHA256 || m == ScramSHA512 }

func (m Mechanism) hash() func() hash.Hash {
	if m == ScramSHA512 {
		return sha512.New
	}
	return sha256.New
}

func (m Mechanism) size() int {
	if m == ScramSHA512 {
		return sha512.Size
	}
	return sha256.Size
}

// Credential is what the broker keeps of a SCRAM password (RFC 5802
// section 3): never the password, only what verifies a proof.
type Credential struct {
	Salt       []byte `json:"salt"`
	Iterations int    `json:"iterations"`
	StoredKey  []byte `json:"stored_key"`
	ServerKey  []byte `json:"server_key"`
}

// SaltPassword is RFC 5802's SaltedPassword := Hi(password, salt, i).
func SaltPassword(m Mechanism, password string, salt []byte, iterations int) ([]byte, error) {
	if !m.valid() {
		return nil, ErrUnknownMechanism
	}
	return pbkdf2.Key(m.hash(), password, salt, iterations, m.size())
}

// CredentialFromSaltedPassword derives StoredKey and ServerKey from a
// salted password, as the broker does for AlterUserScramCredentials (the
// client sends the salted password, never the password).
func CredentialFromSaltedPassword(m Mechanism, salt []byte, iterations int, salted []byte) (Credential, error) {
	if !m.valid() {
		return Credential{}, ErrUnknownMechanism
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations is outside %d-%d", ErrUnacceptableCredential, iterations, MinIterations, MaxIterations)
	}
	if len(salt) == 0 || len(salted) == 0 {
		return Credential{}, fmt.Errorf("%w: empty salt or salted password", ErrUnacceptableCredential)
	}
	clientKey := hmacSum(m, salted, "Client Key")
	storedHash := m.hash()()
	storedHash.Write(clientKey)
	return Credential{
		Salt:       append([]byte(nil), salt...),
		Iterations: iterations,
		StoredKey:  storedHash.Sum(nil),
		ServerKey:  hmacSum(m, salted, "Server Key"),
	}, nil
}

// NewCredential salts password with a fresh random salt.
func NewCredential(m Mechanism, password string, iterations int) (Credential, error) {
	if password == "" {
		return Credential{}, fmt.Errorf("%w: empty password", ErrUnacceptableCredential)
	}
	salt := make([]byte, saltBytes)
	_, _ = rand.Read(salt)
	if iterations == 0 {
		iterations = DefaultIterations
	}
	if iterations < MinIterations || iterations > MaxIterations {
		return Credential{}, fmt.Errorf("%w: %d iterations is outside %d-%d", ErrUnacceptableCredential, iterations, MinIterations, MaxIterations)
	}
	salted, err := SaltPassword(m, password, salt, iterations)
	if err != nil {
		return Credential{}, err
	}
	return CredentialFromSaltedPassword(m, salt, iterations, salted)
}

// Verify reports whether password matches the credential (SASL PLAIN and
// HTTP Basic check passwords against the stored SCRAM keys).
func (c Credential) Verify(m Mechanism, password string) bool {
	if c.Iterations < MinIterations || c.Iterations > MaxIterations {
		return false
	}
	salted, err := SaltPassword(m, password, c.Salt, c.Iterations)
	if err != nil {
		return false
	}
	got, err := CredentialFromSaltedPassword(m, c.Salt, c.Iterations, salted)
	if err != nil {
		return false
	}
	return hmac.Equal(got.StoredKey, c.StoredKey)
}

func hmacSum(m Mechanism, key []byte, msg string) []byte {
	h := hmac.New(m.hash(), key)
	h.Write([]byte(msg))
	return h.Sum(nil)
}
