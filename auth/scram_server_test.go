package auth

import (
	"encoding/base64"
	"errors"
	"strings"
	"testing"

	"github.com/rs/zerolog"
	"github.com/vibemq/broker/pebblestore"
	"github.com/xdg-go/scram"
)

// testStore is a credential store on a real Pebble store in a temp dir
// with the given users (password "<user>-pw", both mechanisms).
func testStore(t testing.TB, users ...string) *Store {
	t.Helper()
	ps, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ps.Close() })
	s, err := Open(ps)
	if err != nil {
		t.Fatal(err)
	}
	var changes []Change
	for _, u := range users {
		for _, m := range Mechanisms {
			c, err := NewCredential(m, u+"-pw", MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			changes = append(changes, Change{User: u, Mechanism: m, Credential: c})
		}
	}
	if err := s.Apply(changes); err != nil {
		t.Fatal(err)
	}
	return s
}

// TestScramExchange: RFC 5802 exchanges with the xdg-go/scram client for
// both mechanisms, an escaped user name ("a,b=c" sent as "a=2Cb=3Dc"), and
// the server signature verified by the client.
func TestScramExchange(t *testing.T) {
	store := testStore(t, "alice", "a,b=c")
	for _, m := range Mechanisms {
		for _, user := range []string{"alice", "a,b=c"} {
			hash := scram.SHA256
			if m == ScramSHA512 {
				hash = scram.SHA512
			}
			client, err := hash.NewClient(user, user+"-pw", "")
			if err != nil {
				t.Fatal(err)
			}
			conv := client.NewConversation()
			sess, _ := StartSession(store, m.String())
			first, _ := conv.Step("")
			serverFirst, done, err := sess.Step([]byte(first))
			if err != nil || done {
				t.Fatalf("%s %s client-first: %v", m, user, err)
			}
			final, err := conv.Step(string(serverFirst))
			if err != nil {
				t.Fatal(err)
			}
			serverFinal, done, err := sess.Step([]byte(final))
			if err != nil || !done || sess.User() != user {
				t.Fatalf("%s %s client-final: %v done=%v user=%q", m, user, err, done, sess.User())
			}
			if _, err := conv.Step(string(serverFinal)); err != nil || !conv.Valid() {
				t.Fatalf("%s: the client rejects the server signature: %v", m, err)
			}
			if _, _, err := sess.Step([]byte("again")); !errors.Is(err, ErrAuthenticationFailed) {
				t.Fatal("a third step did not fail")
			}
		}
	}
}

// clientFinal computes a client-final message for nonce by hand (RFC 5802
// section 3), so that tests can send what librdkafka sends.
func clientFinal(t *testing.T, m Mechanism, password, clientBare, serverFirst, nonce string) string {
	t.Helper()
	attrs := strings.Split(serverFirst, ",")
	salt, _ := base64.StdEncoding.DecodeString(strings.TrimPrefix(attrs[1], "s="))
	salted, err := SaltPassword(m, password, salt, MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	clientKey := hmacBytes(m, salted, []byte("Client Key"))
	h := m.hash()()
	h.Write(clientKey)
	storedKey := h.Sum(nil)
	withoutProof := "c=biws,r=" + nonce
	sig := hmacBytes(m, storedKey, []byte(clientBare+","+serverFirst+","+withoutProof))
	proof := make([]byte, len(sig))
	for i := range sig {
		proof[i] = clientKey[i] ^ sig[i]
	}
	return withoutProof + ",p=" + base64.StdEncoding.EncodeToString(proof)
}

// TestScramNonceRules: the client-final nonce must end with the server's
// nonce (Kafka ScramSaslServer's endsWith): the exact nonce and
// librdkafka's client nonce + nonce pass; a nonce from another exchange
// (a replay) or a truncated one fails; a valid proof with the wrong
// password fails.
func TestScramNonceRules(t *testing.T) {
	store := testStore(t, "alice")
	start := func() (Session, string, string) {
		sess, _ := StartSession(store, "SCRAM-SHA-256")
		serverFirst, _, err := sess.Step([]byte("n,,n=alice,r=cnonce"))
		if err != nil {
			t.Fatal(err)
		}
		nonce := strings.TrimPrefix(strings.Split(string(serverFirst), ",")[0], "r=")
		if !strings.HasPrefix(nonce, "cnonce") || len(nonce) <= len("cnonce") {
			t.Fatalf("server nonce %q", nonce)
		}
		return sess, string(serverFirst), nonce
	}
	for name, tc := range map[string]struct {
		nonce    func(nonce, other string) string
		password string
		ok       bool
	}{
		"exact":              {func(n, _ string) string { return n }, "alice-pw", true},
		"librdkafka":         {func(n, _ string) string { return "cnonce" + n }, "alice-pw", true},
		"replayed":           {func(_, o string) string { return o }, "alice-pw", false},
		"truncated":          {func(n, _ string) string { return n[:len(n)-1] }, "alice-pw", false},
		"wrong password":     {func(n, _ string) string { return n }, "nope", false},
		"client nonce alone": {func(string, string) string { return "cnonce" }, "alice-pw", false},
	} {
		sess, serverFirst, nonce := start()
		_, _, other := start()
		final := clientFinal(t, ScramSHA256, tc.password, "n=alice,r=cnonce", serverFirst, tc.nonce(nonce, other))
		reply, done, err := sess.Step([]byte(final))
		if tc.ok != (err == nil && done) {
			t.Errorf("%s: done=%v err=%v", name, done, err)
		}
		if tc.ok {
			if !strings.HasPrefix(string(reply), "v=") {
				t.Errorf("%s: server-final %q", name, reply)
			}
		}
	}
}

// TestScramMalformed: messages out of order or malformed fail with
// ErrAuthenticationFailed and a reason.
func TestScramMalformed(t *testing.T) {
	store := testStore(t, "alice")
	for name, first := range map[string]string{
		"client-final first": "c=biws,r=abc,p=dGVzdA==",
		"channel binding":    "p=tls-unique,,n=alice,r=x",
		"no nonce":           "n,,n=alice",
		"empty user":         "n,,n=,r=x",
		"bad escape":         "n,,n=a=2Xb,r=x",
		"authzid differs":    "n,a=bob,n=alice,r=x",
		"unknown user":       "n,,n=bob,r=x",
		"mandatory ext":      "n,,n=alice,r=x,m=foo",
		"garbage":            "\x00\x01\x02",
	} {
		sess, _ := StartSession(store, "SCRAM-SHA-512")
		if _, _, err := sess.Step([]byte(first)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
	sess, _ := StartSession(store, "SCRAM-SHA-512")
	if _, _, err := sess.Step([]byte("n,a=alice,n=alice,r=x")); err != nil {
		t.Fatalf("authzid equal to the user: %v", err)
	}
	for name, final := range map[string]string{
		"client-first again": "n,,n=alice,r=x",
		"bad binding":        "c=eSws,r=x,p=AAAA",
		"proof not base64":   "c=biws,r=x,p=!!",
	} {
		s, _ := StartSession(store, "SCRAM-SHA-512")
		if _, _, err := s.Step([]byte("n,,n=alice,r=x")); err != nil {
			t.Fatal(err)
		}
		if _, _, err := s.Step([]byte(final)); !errors.Is(err, ErrAuthenticationFailed) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// TestPlainSession: RFC 4616 against the stored SCRAM keys.
func TestPlainSession(t *testing.T) {
	store := testStore(t, "alice")
	for msg, ok := range map[string]bool{
		"\x00alice\x00alice-pw":      true,
		"alice\x00alice\x00alice-pw": true,
		"bob\x00alice\x00alice-pw":   false,
		"\x00alice\x00wrong":         false,
		"\x00bob\x00bob-pw":          false,
		"\x00alice":                  false,
		"\x00\x00":                   false,
	} {
		sess, _ := StartSession(store, "PLAIN")
		_, done, err := sess.Step([]byte(msg))
		if ok != (done && err == nil) {
			t.Errorf("%q: done=%v err=%v", msg, done, err)
		}
	}
}

// TestStoreDurable: credentials survive a reopen; deleting a missing
// credential fails and changes nothing.
func TestStoreDurable(t *testing.T) {
	dir := t.TempDir()
	ps, err := pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	s, _ := Open(ps)
	c, _ := NewCredential(ScramSHA256, "pw", MinIterations)
	if err := s.Apply([]Change{{User: "u", Mechanism: ScramSHA256, Credential: c}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Apply([]Change{{User: "u", Mechanism: ScramSHA512, Delete: true}}); !errors.Is(err, ErrNoCredential) {
		t.Fatalf("delete missing: %v", err)
	}
	_ = ps.Close()
	ps, err = pebblestore.Open(dir, pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	defer ps.Close()
	s, err = Open(ps)
	if err != nil {
		t.Fatal(err)
	}
	got, ok := s.Lookup("u", ScramSHA256)
	if !ok || !got.Verify(ScramSHA256, "pw") {
		t.Fatal("credential lost or changed by a reopen")
	}
	if _, ok := s.Lookup("u", ScramSHA512); ok {
		t.Fatal("a failed delete left a credential")
	}
}
