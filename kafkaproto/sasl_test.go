package kafkaproto

import (
	"context"
	"encoding/binary"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"github.com/twmb/franz-go/pkg/kbin"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/vibemq/broker/auth"
	"github.com/vibemq/broker/pebblestore"
	"github.com/vibemq/broker/topics"
	"github.com/xdg-go/scram"
)

// fakeClock is the server's injected clock.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Advance(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// startSASLServer serves a SASL_PLAINTEXT listener over a real store with
// the users alice and bob (password "<name>-pw", both SCRAM mechanisms),
// sessions of maxReauth, and an injected clock.
func startSASLServer(t *testing.T, maxReauth time.Duration) (string, *fakeClock) {
	t.Helper()
	store, err := pebblestore.Open(t.TempDir(), pebblestore.Options{Logger: zerolog.Nop(), MemTableSize: 4 << 20, CacheSize: 8 << 20})
	if err != nil {
		t.Fatal(err)
	}
	tm, err := topics.Open(store, topics.Config{Logger: zerolog.Nop(), AutoCreate: true, DefaultPartitions: 1})
	if err != nil {
		t.Fatal(err)
	}
	creds, err := auth.Open(store)
	if err != nil {
		t.Fatal(err)
	}
	var changes []auth.Change
	for _, user := range []string{"alice", "bob"} {
		for _, m := range auth.Mechanisms {
			c, err := auth.NewCredential(m, user+"-pw", auth.MinIterations)
			if err != nil {
				t.Fatal(err)
			}
			changes = append(changes, auth.Change{User: user, Mechanism: m, Credential: c})
		}
	}
	if err := creds.Apply(changes); err != nil {
		t.Fatal(err)
	}
	clock := &fakeClock{now: time.Unix(1_800_000_000, 0)}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s, err := NewServer(Config{Logger: zerolog.Nop(), NodeID: 1, Now: clock.Now,
		SASL: SASLConfig{Credentials: creds, MaxReauth: maxReauth, FailureDelay: time.Millisecond}}, tm)
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		_ = s.ServeListener(ln, Listener{Name: "SASL_PLAINTEXT", Protocol: SASLPlaintext, AdvertisedAddr: ln.Addr().String()})
	}()
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = s.Shutdown(ctx)
		_ = store.Close()
	})
	return ln.Addr().String(), clock
}

type testConn struct {
	t    *testing.T
	c    net.Conn
	corr int32
}

func dialTest(t *testing.T, addr string) *testConn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return &testConn{t: t, c: c}
}

func (tc *testConn) writeFrame(b []byte) {
	tc.t.Helper()
	if _, err := tc.c.Write(b); err != nil {
		tc.t.Fatal(err)
	}
}

func (tc *testConn) readFrame() ([]byte, error) {
	_ = tc.c.SetReadDeadline(time.Now().Add(10 * time.Second))
	var size [4]byte
	if _, err := io.ReadFull(tc.c, size[:]); err != nil {
		return nil, err
	}
	body := make([]byte, binary.BigEndian.Uint32(size[:]))
	_, err := io.ReadFull(tc.c, body)
	return body, err
}

func (tc *testConn) roundTrip(req kmsg.Request) kmsg.Response {
	tc.t.Helper()
	tc.corr++
	tc.writeFrame(kmsg.NewRequestFormatter().AppendRequest(nil, req, tc.corr))
	body, err := tc.readFrame()
	if err != nil {
		tc.t.Fatalf("%s: %v", kmsg.NameForKey(req.Key()), err)
	}
	rd := kbin.Reader{Src: body}
	rd.Int32()
	resp := req.ResponseKind()
	resp.SetVersion(req.GetVersion())
	if resp.IsFlexible() {
		kmsg.SkipTags(&rd)
	}
	if err := resp.ReadFrom(rd.Src); err != nil {
		tc.t.Fatal(err)
	}
	return resp
}

// expectClosed asserts the server closes the connection.
func (tc *testConn) expectClosed(what string) {
	tc.t.Helper()
	for {
		if _, err := tc.readFrame(); err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				tc.t.Fatalf("%s: connection left open", what)
			}
			return
		}
	}
}

func (tc *testConn) handshake(version int16, mechanism string) int16 {
	req := kmsg.NewPtrSASLHandshakeRequest()
	req.Version, req.Mechanism = version, mechanism
	return tc.roundTrip(req).(*kmsg.SASLHandshakeResponse).ErrorCode
}

func (tc *testConn) authenticate(token string) *kmsg.SASLAuthenticateResponse {
	req := kmsg.NewPtrSASLAuthenticateRequest()
	req.Version, req.SASLAuthBytes = 1, []byte(token)
	return tc.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
}

func (tc *testConn) plainLogin(user string) *kmsg.SASLAuthenticateResponse {
	tc.t.Helper()
	if code := tc.handshake(1, "PLAIN"); code != 0 {
		tc.t.Fatalf("handshake: %d", code)
	}
	return tc.authenticate("\x00" + user + "\x00" + user + "-pw")
}

func (tc *testConn) metadataOK() {
	tc.t.Helper()
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	if resp := tc.roundTrip(req).(*kmsg.MetadataResponse); len(resp.Brokers) != 1 {
		tc.t.Fatalf("metadata: %+v", resp)
	}
}

func (tc *testConn) sendMetadata() {
	tc.corr++
	req := kmsg.NewPtrMetadataRequest()
	req.Version = 9
	tc.writeFrame(kmsg.NewRequestFormatter().AppendRequest(nil, req, tc.corr))
}

// TestSASLSessionExpiry (KIP-368): SaslAuthenticate v1 reports
// connections-max-reauth as session_lifetime_ms; once it has passed
// without re-authentication, the next request closes the connection.
func TestSASLSessionExpiry(t *testing.T) {
	addr, clock := startSASLServer(t, time.Hour)
	c := dialTest(t, addr)
	resp := c.plainLogin("alice")
	if resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("authenticate: %s, lifetime %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	c.metadataOK()
	clock.Advance(time.Hour)
	c.sendMetadata()
	c.expectClosed("request after the session expired")
}

// TestSASLReauthenticate (KIP-368): a v1 handshake on an authenticated
// connection re-authenticates and extends the session; it must keep the
// principal and the mechanism.
func TestSASLReauthenticate(t *testing.T) {
	addr, clock := startSASLServer(t, time.Hour)
	c := dialTest(t, addr)
	if resp := c.plainLogin("alice"); resp.ErrorCode != 0 {
		t.Fatal(kerr.ErrorForCode(resp.ErrorCode))
	}
	clock.Advance(50 * time.Minute)
	if resp := c.plainLogin("alice"); resp.ErrorCode != 0 || resp.SessionLifetimeMillis != time.Hour.Milliseconds() {
		t.Fatalf("re-authentication: %v %d", kerr.ErrorForCode(resp.ErrorCode), resp.SessionLifetimeMillis)
	}
	clock.Advance(50 * time.Minute) // past the first session, within the second
	c.metadataOK()

	other := dialTest(t, addr)
	other.plainLogin("alice")
	if resp := other.plainLogin("bob"); resp.ErrorCode != kerr.SaslAuthenticationFailed.Code {
		t.Fatalf("re-authentication as another principal: %v", kerr.ErrorForCode(resp.ErrorCode))
	}
	other.expectClosed("re-authentication as bob")

	third := dialTest(t, addr)
	third.plainLogin("alice")
	if code := third.handshake(1, "SCRAM-SHA-256"); code != kerr.IllegalSaslState.Code {
		t.Fatalf("re-authentication with another mechanism: %v", kerr.ErrorForCode(code))
	}
	third.expectClosed("re-authentication with another mechanism")
	c.metadataOK()
}

// TestSASLHandshakeV0 (KIP-43): after a v0 handshake the tokens are bare
// length-prefixed frames, for PLAIN (one empty reply) and SCRAM (two
// exchanges); then the connection serves Kafka requests. A wrong password
// over v0 closes the connection without a reply.
func TestSASLHandshakeV0(t *testing.T) {
	addr, _ := startSASLServer(t, 0)
	raw := func(c *testConn, token string) []byte {
		t.Helper()
		c.writeFrame(binary.BigEndian.AppendUint32(nil, uint32(len(token))))
		c.writeFrame([]byte(token))
		reply, err := c.readFrame()
		if err != nil {
			t.Fatalf("raw token: %v", err)
		}
		return reply
	}
	c := dialTest(t, addr)
	if code := c.handshake(0, "PLAIN"); code != 0 {
		t.Fatal(code)
	}
	if reply := raw(c, "\x00alice\x00alice-pw"); len(reply) != 0 {
		t.Fatalf("PLAIN reply %q", reply)
	}
	c.metadataOK()

	s := dialTest(t, addr)
	if code := s.handshake(0, "SCRAM-SHA-512"); code != 0 {
		t.Fatal(code)
	}
	client, err := scram.SHA512.NewClient("bob", "bob-pw", "")
	if err != nil {
		t.Fatal(err)
	}
	conv := client.NewConversation()
	first, _ := conv.Step("")
	final, err := conv.Step(string(raw(s, first)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := conv.Step(string(raw(s, final))); err != nil || !conv.Valid() {
		t.Fatalf("server signature: %v", err)
	}
	s.metadataOK()

	bad := dialTest(t, addr)
	bad.handshake(0, "PLAIN")
	bad.writeFrame(binary.BigEndian.AppendUint32(nil, 12))
	bad.writeFrame([]byte("\x00alice\x00wrong"))
	bad.expectClosed("wrong password over v0")
}
