package auth

import "testing"

// FuzzSaslSession feeds two arbitrary tokens to each mechanism: the
// exchange never panics, and it only succeeds for the stored user.
func FuzzSaslSession(f *testing.F) {
	f.Add(uint8(0), []byte("\x00alice\x00alice-pw"), []byte(""))
	f.Add(uint8(1), []byte("n,,n=alice,r=abc"), []byte("c=biws,r=abc,p=AAAA"))
	f.Add(uint8(2), []byte("n,a=alice,n=alice,r=x,ext=1"), []byte("c=,r=,p="))
	f.Add(uint8(1), []byte("c=biws,r=abc,p=dGVzdA=="), []byte("n,,n=a=2Cb,r=x"))
	store := testStore(f, "alice")
	mechs := []string{MechanismPlain, "SCRAM-SHA-256", "SCRAM-SHA-512"}
	f.Fuzz(func(t *testing.T, mech uint8, a, b []byte) {
		sess, ok := StartSession(store, mechs[int(mech)%len(mechs)])
		if !ok {
			t.Fatal("mechanism unknown")
		}
		for _, tok := range [][]byte{a, b} {
			_, done, err := sess.Step(tok)
			if done && sess.User() != "alice" {
				t.Fatalf("authenticated as %q", sess.User())
			}
			if err != nil || done {
				return
			}
		}
	})
}

// FuzzPrincipalRules: parsing arbitrary rules and mapping arbitrary DNs
// never panics.
func FuzzPrincipalRules(f *testing.F) {
	f.Add("RULE:^CN=(.*?),OU=(.*?)$/$1@$2/L,DEFAULT", "CN=a,OU=b")
	f.Add("RULE:a/b/U", "a")
	f.Add("DEFAULT", "")
	f.Fuzz(func(t *testing.T, rules, dn string) {
		pm, err := ParsePrincipalRules(rules)
		if err != nil {
			return
		}
		_, _ = pm.Map(dn)
	})
}
