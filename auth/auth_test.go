package auth

import (
	"crypto/x509"
	"crypto/x509/pkix"
	"net/netip"
	"testing"
	"time"
)

// TestPrincipalRules follows Kafka's SslPrincipalMapperTest cases: the
// first matching rule wins, L/U change case, DEFAULT is the whole DN, and
// no matching rule is an error.
func TestPrincipalRules(t *testing.T) {
	pm, err := ParsePrincipalRules(`RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,RULE:^CN=(.*?),OU=(.*?),O=(.*?)$/$1@$2/L,RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,DEFAULT`)
	if err != nil {
		t.Fatal(err)
	}
	for dn, want := range map[string]string{
		"CN=kafka1,OU=ServiceUsers,O=Org,C=US": "kafka1",
		"CN=Duke,OU=SME,O=mycp":                "duke@sme",
		"OU=JavaSoft,cn=duke":                  "DUKE",
		"O=Org":                                "O=Org",
	} {
		if got, err := pm.Map(dn); err != nil || got != want {
			t.Errorf("Map(%q) = %q, %v; want %q", dn, got, err, want)
		}
	}
	only, err := ParsePrincipalRules(`RULE:^CN=([^,]+),.*$/$1/`)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := only.Map("O=nobody"); err == nil {
		t.Error("a DN no rule matches was mapped")
	}
	for _, bad := range []string{"RULE:abc", "FOO", "RULE:(/x/"} {
		if _, err := ParsePrincipalRules(bad); err == nil {
			t.Errorf("rules %q parsed", bad)
		}
	}
	cert := &x509.Certificate{Subject: pkix.Name{CommonName: "alice", OrganizationalUnit: []string{"eng"}, Organization: []string{"Example"}, Country: []string{"US"}}}
	if got := SubjectDN(cert); got != "CN=alice,OU=eng,O=Example,C=US" {
		t.Errorf("SubjectDN = %q", got)
	}
}

// TestCredentialVerify: a password verifies against its own credential
// only, for both mechanisms; iteration bounds are enforced.
func TestCredentialVerify(t *testing.T) {
	for _, m := range Mechanisms {
		c, err := NewCredential(m, "pw", MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		if !c.Verify(m, "pw") || c.Verify(m, "pW") {
			t.Errorf("%s: Verify wrong", m)
		}
	}
	if _, err := NewCredential(ScramSHA256, "pw", 1000); err == nil {
		t.Error("1000 iterations accepted")
	}
	if _, err := NewCredential(ScramSHA256, "", 0); err == nil {
		t.Error("empty password accepted")
	}
}

// TestFailureDelayBounded: delays grow per address up to Max, reset after
// Window, and the table never holds more than MaxAddresses addresses.
func TestFailureDelayBounded(t *testing.T) {
	f := &FailureDelay{Step: 100 * time.Millisecond, Max: 300 * time.Millisecond, Window: time.Minute, MaxAddresses: 3}
	now := time.Unix(1000, 0)
	a := netip.MustParseAddr("10.0.0.1")
	for i, want := range []time.Duration{100, 200, 300, 300} {
		if got := f.Failed(a, now); got != want*time.Millisecond {
			t.Errorf("failure %d: delay %v, want %vms", i+1, got, want)
		}
	}
	if got := f.Failed(a, now.Add(2*time.Minute)); got != 100*time.Millisecond {
		t.Errorf("after the window: %v", got)
	}
	for i := range 100 {
		f.Failed(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), now.Add(2*time.Minute+time.Duration(i)))
	}
	if f.Len() > 3 {
		t.Errorf("remembers %d addresses, more than 3", f.Len())
	}
	f.Succeeded(netip.AddrFrom4([4]byte{10, 1, 0, 99}))
	if f.Len() > 2 {
		t.Errorf("success did not forget the address")
	}
}
