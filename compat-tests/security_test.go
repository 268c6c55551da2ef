package compattests

import (
	"crypto/tls"
	"encoding/binary"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/twmb/franz-go/pkg/kadm"
	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kgo"
	"github.com/twmb/franz-go/pkg/kmsg"
	"github.com/twmb/franz-go/pkg/sasl"
	"github.com/twmb/franz-go/pkg/sasl/plain"
	"github.com/twmb/franz-go/pkg/sasl/scram"
	xdgscram "github.com/xdg-go/scram"
)

// The secure broker: four listeners ({0} PLAINTEXT, {1} SASL_PLAINTEXT,
// {2} SASL_SSL, {3} SSL with client certificates requested), a bootstrap
// admin, and the CN of a client certificate as its principal.
const (
	secureListeners = "PLAINTEXT://{0},SASL_PLAINTEXT://{1},SASL_SSL://{2},SSL://{3}"
	adminUser       = "admin"
	adminPassword   = "admin-secret"
)

type secureBroker struct {
	*brokerProc
	pki *testPKI
}

func (b *secureBroker) plaintext() string     { return b.Addr() }
func (b *secureBroker) saslPlaintext() string { return b.ExtraAddr(1) }
func (b *secureBroker) saslSSL() string       { return b.ExtraAddr(2) }
func (b *secureBroker) ssl() string           { return b.ExtraAddr(3) }

func startSecureBroker(t testing.TB, extra ...string) *secureBroker {
	return startSecureBrokerAuth(t, "requested", extra...)
}

// startSecureBrokerAuth is startSecureBroker with ssl-client-auth clientAuth.
func startSecureBrokerAuth(t testing.TB, clientAuth string, extra ...string) *secureBroker {
	t.Helper()
	pki := newTestPKI(t)
	pw := filepath.Join(pki.dir, "admin.password")
	if err := os.WriteFile(pw, []byte(adminPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{
		"--ssl-cert-file", pki.serverCert, "--ssl-key-file", pki.serverKey,
		"--ssl-client-ca-file", pki.caFile, "--ssl-client-auth", clientAuth,
		"--ssl-principal-mapping-rules", "RULE:^CN=([^,]+),.*$/$1/,DEFAULT",
		"--sasl-bootstrap-user", adminUser, "--sasl-bootstrap-password-file", pw,
		"--connection-failed-authentication-delay", "10ms",
	}, extra...)
	b := startBroker(t, withListeners(secureListeners), withArgs(args...))
	return &secureBroker{brokerProc: b, pki: pki}
}

// waitLog reports whether the broker's log contains want within 10s.
func waitLog(b *brokerProc, want string) bool {
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if strings.Contains(b.Log(), want) {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
	}
}

// secureOpts are franz-go options for a SASL mechanism over one listener.
func (b *secureBroker) saslOpts(t testing.TB, useTLS bool, mech sasl.Mechanism) []kgo.Opt {
	opts := []kgo.Opt{kgo.SASL(mech)}
	addr := b.saslPlaintext()
	if useTLS {
		addr = b.saslSSL()
		opts = append(opts, kgo.DialTLSConfig(b.pki.clientTLS(t, "")))
	}
	return append(opts, kgo.SeedBrokers(addr))
}

func scram512(user, pass string) sasl.Mechanism {
	return scram.Auth{User: user, Pass: pass}.AsSha512Mechanism()
}

func (b *secureBroker) adminClient(t testing.TB) *kadm.Client {
	cl := newClient(t, b.saslSSL(), b.saslOpts(t, true, scram512(adminUser, adminPassword))...)
	return kadm.NewClient(cl)
}

// createUser gives user both SCRAM credentials, through the admin API.
func createUser(t testing.TB, adm *kadm.Client, user, password string) {
	t.Helper()
	ctx := testCtx(t, opTimeout)
	res, err := adm.AlterUserSCRAMs(ctx, nil, []kadm.UpsertSCRAM{
		{User: user, Mechanism: kadm.ScramSha256, Iterations: 4096, Password: password},
		{User: user, Mechanism: kadm.ScramSha512, Iterations: 8192, Password: password},
	})
	if err != nil {
		t.Fatalf("AlterUserSCRAMs: %v", err)
	}
	if err := res.Error(); err != nil {
		t.Fatalf("AlterUserSCRAMs %s: %v", user, err)
	}
}

// produceConsumeGroup produces three records with a client built from
// opts, consumes them in a new consumer group and runs an admin call
// (Metadata: the broker must advertise wantAddr, the listener used).
func produceConsumeGroup(t *testing.T, wantAddr string, opts ...kgo.Opt) {
	t.Helper()
	topic := topicName(t, "")
	adm := kadm.NewClient(newClient(t, wantAddr, opts...))
	createTopic(t, adm, topic, 1, nil)
	meta, err := adm.BrokerMetadata(testCtx(t, opTimeout))
	if err != nil {
		t.Fatalf("metadata: %v", err)
	}
	host, port, _ := net.SplitHostPort(wantAddr)
	if len(meta.Brokers) != 1 || meta.Brokers[0].Host != host || strconv.Itoa(int(meta.Brokers[0].Port)) != port {
		t.Fatalf("metadata brokers %+v, want the listener's address %s", meta.Brokers, wantAddr)
	}
	prod := newClient(t, wantAddr, opts...)
	ctx := testCtx(t, opTimeout)
	for i := range 3 {
		if err := prod.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte("v" + strconv.Itoa(i))}).FirstErr(); err != nil {
			t.Fatalf("produce: %v", err)
		}
	}
	cons := newClient(t, wantAddr, append(opts, kgo.ConsumerGroup(topic+"-g"), kgo.ConsumeTopics(topic),
		kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	var got []string
	for len(got) < 3 {
		fs := cons.PollFetches(ctx)
		if err := ctx.Err(); err != nil {
			t.Fatalf("consumed %v before the deadline", got)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		fs.EachRecord(func(r *kgo.Record) { got = append(got, string(r.Value)) })
	}
	if strings.Join(got, ",") != "v0,v1,v2" {
		t.Fatalf("consumed %v, want v0,v1,v2", got)
	}
	if err := cons.CommitUncommittedOffsets(ctx); err != nil {
		t.Fatalf("commit: %v", err)
	}
	lags, err := adm.Lag(ctx, topic+"-g")
	if err != nil || lags[topic+"-g"].Lag.Total() != 0 {
		t.Fatalf("group lag after commit: %v %+v", err, lags)
	}
}

// expectAuthFailure asserts that a client built from opts gets
// SASL_AUTHENTICATION_FAILED.
func expectAuthFailure(t *testing.T, addr string, opts ...kgo.Opt) {
	t.Helper()
	cl := newClient(t, addr, append(opts, kgo.RetryTimeout(5*time.Second))...)
	_, err := kadm.NewClient(cl).ListTopics(testCtx(t, 30*time.Second))
	if !errors.Is(err, kerr.SaslAuthenticationFailed) {
		t.Fatalf("wrong credentials: got %v, want SASL_AUTHENTICATION_FAILED", err)
	}
}

// TestSecurityFranzSASL: franz-go pkg/sasl PLAIN, SCRAM-SHA-256 and
// SCRAM-SHA-512 over SASL_PLAINTEXT and SASL_SSL: a user created with
// AlterUserScramCredentials connects, produces, consumes in a group and
// runs admin calls, and each listener advertises its own address; a wrong
// password gets SASL_AUTHENTICATION_FAILED.
func TestSecurityFranzSASL(t *testing.T) {
	b := startSecureBroker(t)
	adm := b.adminClient(t)
	createUser(t, adm, "alice", "alice-pw")
	described, err := adm.DescribeUserSCRAMs(testCtx(t, opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if d := described["alice"]; len(d.CredInfos) != 2 || d.CredInfos[0].Iterations != 4096 || d.CredInfos[1].Iterations != 8192 {
		t.Fatalf("DescribeUserSCRAMs alice: %+v", d)
	}
	if _, ok := described[adminUser]; !ok {
		t.Fatalf("bootstrap user missing: %+v", described)
	}
	mechs := map[string]func(user, pass string) sasl.Mechanism{
		"PLAIN":         func(u, p string) sasl.Mechanism { return plain.Auth{User: u, Pass: p}.AsMechanism() },
		"SCRAM-SHA-256": func(u, p string) sasl.Mechanism { return scram.Auth{User: u, Pass: p}.AsSha256Mechanism() },
		"SCRAM-SHA-512": scram512,
	}
	for _, useTLS := range []bool{false, true} {
		for name, mech := range mechs {
			proto := "SASL_PLAINTEXT"
			addr := b.saslPlaintext()
			if useTLS {
				proto, addr = "SASL_SSL", b.saslSSL()
			}
			t.Run(proto+"/"+name, func(t *testing.T) {
				produceConsumeGroup(t, addr, b.saslOpts(t, useTLS, mech("alice", "alice-pw"))...)
				expectAuthFailure(t, addr, b.saslOpts(t, useTLS, mech("alice", "wrong"))...)
				expectAuthFailure(t, addr, b.saslOpts(t, useTLS, mech("nobody", "alice-pw"))...)
			})
		}
	}
	t.Run("PLAINTEXT still open", func(t *testing.T) {
		produceConsumeGroup(t, b.plaintext())
	})
	// A deleted credential no longer authenticates.
	res, err := adm.AlterUserSCRAMs(testCtx(t, opTimeout), []kadm.DeleteSCRAM{{User: "alice", Mechanism: kadm.ScramSha256}}, nil)
	if err != nil || res.Error() != nil {
		t.Fatalf("delete: %v %v", err, res.Error())
	}
	expectAuthFailure(t, b.saslPlaintext(), b.saslOpts(t, false, scram.Auth{User: "alice", Pass: "alice-pw"}.AsSha256Mechanism())...)
	produceConsumeGroup(t, b.saslPlaintext(), b.saslOpts(t, false, scram512("alice", "alice-pw"))...)
	if !strings.Contains(b.Log(), `"message":"closing connection: SASL authentication failed"`) {
		t.Fatal("no log line for the failed authentications")
	}
	if strings.Contains(b.Log(), "alice-pw") || strings.Contains(b.Log(), adminPassword) {
		t.Fatal("a password is in the broker log")
	}
}

// TestSecurityFranzMTLS: franz-go over the SSL listener with a client
// certificate (mutual TLS) produces, consumes in a group and runs admin
// calls; with ssl-client-auth required, a certificate from an unknown CA
// (which the Go client then does not send) is refused at the handshake;
// the principal mapped from the subject's CN is User:alice.
func TestSecurityFranzMTLS(t *testing.T) {
	b := startSecureBrokerAuth(t, "required", "--log-level", "debug")
	produceConsumeGroup(t, b.ssl(), kgo.DialTLSConfig(b.pki.clientTLS(t, "alice")))
	cl := newClient(t, b.ssl(), kgo.DialTLSConfig(b.pki.clientTLS(t, "mallory")), kgo.RetryTimeout(3*time.Second))
	if _, err := kadm.NewClient(cl).ListTopics(testCtx(t, 20*time.Second)); err == nil {
		t.Fatal("a client certificate from an unknown CA was accepted")
	}
	// The client may see the refusal before the broker has logged it.
	if !waitLog(b.brokerProc, "TLS handshake failed") {
		t.Fatal("no log line for the refused certificate")
	}
	if !strings.Contains(b.Log(), `"principal":"User:alice"`) {
		t.Fatal("the client certificate's CN did not become the principal User:alice")
	}
}

// TestSecurityBadInput: hostile or confused clients on the security
// listeners each lose only their own connection, with a log line, and
// change nothing: a request before authentication, an oversized token,
// SCRAM messages out of order, a replayed client-final (nonce mismatch), a
// wrong PLAIN password, an unknown mechanism, TLS on the plaintext port
// and plaintext on a TLS port; an unauthenticated client on the PLAINTEXT
// listener cannot create a user. The broker keeps serving and the stored
// users are unchanged.
func TestSecurityBadInput(t *testing.T) {
	b := startSecureBroker(t)
	adm := b.adminClient(t)
	before, err := adm.DescribeUserSCRAMs(testCtx(t, opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	handshake := func(c *rawConn, mech string) {
		t.Helper()
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, mech
		if resp := c.roundTrip(req).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != 0 {
			t.Fatalf("handshake %s: %s", mech, errName(resp.ErrorCode))
		}
	}
	authenticate := func(c *rawConn, token []byte) *kmsg.SASLAuthenticateResponse {
		t.Helper()
		req := kmsg.NewPtrSASLAuthenticateRequest()
		req.Version, req.SASLAuthBytes = 2, token
		return c.roundTrip(req).(*kmsg.SASLAuthenticateResponse)
	}
	expectFailed := func(c *rawConn, what string, token []byte) {
		t.Helper()
		resp := authenticate(c, token)
		if resp.ErrorCode != kerr.SaslAuthenticationFailed.Code || resp.ErrorMessage == nil {
			t.Fatalf("%s: got %s, want SASL_AUTHENTICATION_FAILED with a message", what, errName(resp.ErrorCode))
		}
		c.expectClosed(what)
	}

	t.Run("request before authentication", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		c.send(kmsg.NewPtrMetadataRequest())
		c.expectClosed("Metadata before SASL")
	})
	t.Run("oversized token", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		var hdr [4]byte
		binary.BigEndian.PutUint32(hdr[:], 600<<10)
		c.writeAll(hdr[:])
		c.expectClosed("600 KiB frame before SASL")
	})
	t.Run("SCRAM client-final first", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		handshake(c, "SCRAM-SHA-256")
		expectFailed(c, "client-final first", []byte("c=biws,r=abcdef,p=dGVzdA=="))
	})
	t.Run("SCRAM replayed client-final", func(t *testing.T) {
		// A complete, valid exchange; its client-final is then replayed in
		// a new exchange, whose server nonce differs.
		client, err := xdgscram.SHA512.NewClient(adminUser, adminPassword, "")
		if err != nil {
			t.Fatal(err)
		}
		conv := client.NewConversation()
		first, _ := conv.Step("")
		c := dialRaw(t, b.saslPlaintext())
		handshake(c, "SCRAM-SHA-512")
		serverFirst := authenticate(c, []byte(first))
		final, err := conv.Step(string(serverFirst.SASLAuthBytes))
		if err != nil {
			t.Fatal(err)
		}
		if resp := authenticate(c, []byte(final)); resp.ErrorCode != 0 {
			t.Fatalf("valid exchange failed: %s", errName(resp.ErrorCode))
		}
		c2 := dialRaw(t, b.saslPlaintext())
		handshake(c2, "SCRAM-SHA-512")
		if resp := authenticate(c2, []byte(first)); resp.ErrorCode != 0 {
			t.Fatalf("client-first: %s", errName(resp.ErrorCode))
		}
		expectFailed(c2, "replayed client-final", []byte(final))
	})
	t.Run("wrong PLAIN password", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		handshake(c, "PLAIN")
		expectFailed(c, "wrong password", []byte("\x00"+adminUser+"\x00nope"))
	})
	t.Run("unknown mechanism", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		req := kmsg.NewPtrSASLHandshakeRequest()
		req.Version, req.Mechanism = 1, "GSSAPI"
		if resp := c.roundTrip(req).(*kmsg.SASLHandshakeResponse); resp.ErrorCode != kerr.UnsupportedSaslMechanism.Code {
			t.Fatalf("GSSAPI: %s", errName(resp.ErrorCode))
		}
		c.expectClosed("unknown mechanism")
	})
	t.Run("authenticate without handshake", func(t *testing.T) {
		c := dialRaw(t, b.saslPlaintext())
		if resp := authenticate(c, []byte("x")); resp.ErrorCode != kerr.IllegalSaslState.Code {
			t.Fatalf("got %s, want ILLEGAL_SASL_STATE", errName(resp.ErrorCode))
		}
		c.expectClosed("SaslAuthenticate without handshake")
	})
	t.Run("TLS on the plaintext port", func(t *testing.T) {
		d := &net.Dialer{Timeout: 10 * time.Second}
		conn, err := tls.DialWithDialer(d, "tcp", b.plaintext(), b.pki.clientTLS(t, ""))
		if err == nil {
			conn.Close()
			t.Fatal("TLS handshake succeeded on the plaintext listener")
		}
	})
	t.Run("plaintext on the TLS port", func(t *testing.T) {
		c := dialRaw(t, b.saslSSL())
		c.send(kmsg.NewPtrApiVersionsRequest())
		c.expectClosed("plaintext ApiVersions on SASL_SSL")
	})

	t.Run("anonymous credential change", func(t *testing.T) {
		anon := kadm.NewClient(newClient(t, b.plaintext()))
		res, err := anon.AlterUserSCRAMs(testCtx(t, opTimeout), nil, []kadm.UpsertSCRAM{{User: "eve", Mechanism: kadm.ScramSha256, Iterations: 4096, Password: "x"}})
		if !errors.Is(err, kerr.ClusterAuthorizationFailed) && !errors.Is(res["eve"].Err, kerr.ClusterAuthorizationFailed) {
			t.Fatalf("anonymous AlterUserScramCredentials: %v %+v, want CLUSTER_AUTHORIZATION_FAILED", err, res)
		}
	})

	after, err := adm.DescribeUserSCRAMs(testCtx(t, opTimeout))
	if err != nil {
		t.Fatal(err)
	}
	if len(after) != len(before) {
		t.Fatalf("users changed: before %v, after %v", before, after)
	}
	b.Alive()
	produceConsumeGroup(t, b.saslSSL(), b.saslOpts(t, true, scram512(adminUser, adminPassword))...)
	waitLog(b.brokerProc, "TLS handshake failed")
	log := b.Log()
	for _, want := range []string{
		"before SASL authentication completed",
		"request size out of range",
		"closing connection: SASL authentication failed",
		"does not end with the nonce the server sent",
		"a TLS handshake arrived on a plaintext listener",
		"TLS handshake failed",
		"SASL mechanism that is not enabled",
		"SaslAuthenticate without a SaslHandshake",
	} {
		if !strings.Contains(log, want) {
			t.Errorf("no log line containing %q", want)
		}
	}
}

// TestSecurityFranzReauth (KIP-368): with connections-max-reauth 2s,
// franz-go re-authenticates its connections before their sessions end
// (SaslAuthenticate v1 session_lifetime_ms) and keeps producing and
// consuming across several session lifetimes without a closed connection.
func TestSecurityFranzReauth(t *testing.T) {
	b := startSecureBroker(t, "--connections-max-reauth", "2s", "--log-level", "debug")
	opts := b.saslOpts(t, true, scram512(adminUser, adminPassword))
	topic := topicName(t, "")
	createTopic(t, kadm.NewClient(newClient(t, b.saslSSL(), opts...)), topic, 1, nil)
	cl := newClient(t, b.saslSSL(), append(opts, kgo.ConsumeTopics(topic), kgo.ConsumeResetOffset(kgo.NewOffset().AtStart()))...)
	ctx := testCtx(t, opTimeout)
	deadline := time.Now().Add(5 * time.Second) // 2.5 session lifetimes
	n := 0
	for ; time.Now().Before(deadline); n++ {
		if err := cl.ProduceSync(ctx, &kgo.Record{Topic: topic, Value: []byte(strconv.Itoa(n))}).FirstErr(); err != nil {
			t.Fatalf("produce %d: %v", n, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	got := 0
	for got < n {
		fs := cl.PollFetches(ctx)
		if ctx.Err() != nil {
			t.Fatalf("consumed %d of %d", got, n)
		}
		fs.EachError(func(_ string, _ int32, err error) { t.Fatalf("fetch: %v", err) })
		got += fs.NumRecords()
	}
	log := b.Log()
	if !strings.Contains(log, `"reauthentication":true`) {
		t.Fatal("no re-authentication in the broker log")
	}
	if strings.Contains(log, "SASL session expired") {
		t.Fatal("a session expired: the client was not given time to re-authenticate")
	}
}

// TestSecurityTLSReload: the broker's certificate files are replaced while
// it runs (a renewal by another CA); new connections get the new
// certificate without a restart, and a broken replacement (a key that does
// not match) keeps the working one.
func TestSecurityTLSReload(t *testing.T) {
	b := startSecureBroker(t)
	produceConsumeGroup(t, b.ssl(), kgo.DialTLSConfig(b.pki.clientTLS(t, "")))
	renewed := newTestPKI(t)
	copyFile := func(from, to string) {
		t.Helper()
		data, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	copyFile(renewed.serverCert, b.pki.serverCert)
	copyFile(renewed.serverKey, b.pki.serverKey)
	// The files are checked at most once a second, on a handshake.
	deadline := time.Now().Add(15 * time.Second)
	for {
		conn, err := tls.Dial("tcp", b.ssl(), renewed.clientTLS(t, ""))
		if err == nil {
			conn.Close()
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the renewed certificate is not served: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	produceConsumeGroup(t, b.ssl(), kgo.DialTLSConfig(renewed.clientTLS(t, "")))
	if !strings.Contains(b.Log(), "TLS certificate reloaded") {
		t.Fatal("no log line for the reload")
	}
	// A key of another certificate: refused, the renewed pair stays.
	copyFile(b.pki.aliceKey, b.pki.serverKey)
	time.Sleep(1100 * time.Millisecond)
	conn, err := tls.Dial("tcp", b.ssl(), renewed.clientTLS(t, ""))
	if err != nil {
		t.Fatalf("a broken replacement broke TLS: %v", err)
	}
	conn.Close()
	if !strings.Contains(b.Log(), "TLS files changed but cannot be loaded") {
		t.Fatal("no log line for the broken replacement")
	}
	b.Alive()
}
