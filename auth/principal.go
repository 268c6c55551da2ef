package auth

import (
	"crypto/x509"
	"fmt"
	"regexp"
	"strings"
)

// Principals are written as Kafka writes KafkaPrincipal: "User:name".
const (
	// PrincipalType is the only principal type (Kafka KafkaPrincipal.USER_TYPE).
	PrincipalType = "User"
	// Anonymous is the principal of a connection that did not authenticate
	// (PLAINTEXT, or SSL without a client certificate).
	Anonymous = "User:ANONYMOUS"
)

// UserPrincipal is the principal of a user name.
func UserPrincipal(name string) string { return PrincipalType + ":" + name }

// PrincipalMapper turns a certificate subject into a user name by Kafka's
// ssl.principal.mapping.rules (KIP-371): a comma-separated list of
// "RULE:pattern/replacement/" with an optional L or U (lower or upper case
// the result) after the last slash, and "DEFAULT" (the whole DN). The
// first rule whose pattern matches the whole DN wins; no match is an
// error, as in Kafka.
type PrincipalMapper struct {
	rules []principalRule
}

type principalRule struct {
	isDefault   bool
	pattern     *regexp.Regexp
	replacement string
	caseMode    byte // 0, 'L' or 'U'
}

// ruleSyntax is one rule of the list (Kafka SslPrincipalMapper.RULE_PARSER).
var ruleSyntax = regexp.MustCompile(`^\s*(?:(DEFAULT)|RULE:((?:\\/|[^/])*)/((?:\\/|[^/])*)/([LU])?)\s*(?:,|$)`)

// ParsePrincipalRules parses ssl.principal.mapping.rules; "" means DEFAULT.
func ParsePrincipalRules(s string) (*PrincipalMapper, error) {
	pm := &PrincipalMapper{}
	rest := strings.TrimSpace(s)
	if rest == "" {
		rest = "DEFAULT"
	}
	for rest != "" {
		m := ruleSyntax.FindStringSubmatchIndex(rest)
		if m == nil {
			return nil, fmt.Errorf("principal mapping rule %q is not RULE:pattern/replacement/[LU] or DEFAULT", rest)
		}
		if m[2] >= 0 {
			pm.rules = append(pm.rules, principalRule{isDefault: true})
		} else {
			pattern := strings.ReplaceAll(rest[m[4]:m[5]], `\/`, "/")
			re, err := regexp.Compile("^(?:" + pattern + ")$")
			if err != nil {
				return nil, fmt.Errorf("principal mapping rule pattern %q: %v", pattern, err)
			}
			r := principalRule{pattern: re, replacement: strings.ReplaceAll(rest[m[6]:m[7]], `\/`, "/")}
			if m[8] >= 0 {
				r.caseMode = rest[m[8]]
			}
			pm.rules = append(pm.rules, r)
		}
		rest = strings.TrimSpace(rest[m[1]:])
	}
	return pm, nil
}

// Map returns the user name for a distinguished name.
func (pm *PrincipalMapper) Map(dn string) (string, error) {
	for _, r := range pm.rules {
		if r.isDefault {
			return dn, nil
		}
		sub := r.pattern.FindStringSubmatchIndex(dn)
		if sub == nil {
			continue
		}
		out := string(r.pattern.ExpandString(nil, r.replacement, dn, sub))
		switch r.caseMode {
		case 'L':
			out = strings.ToLower(out)
		case 'U':
			out = strings.ToUpper(out)
		}
		return out, nil
	}
	return "", fmt.Errorf("no principal mapping rule matches the certificate subject %q", dn)
}

// SubjectDN formats a certificate's subject as Java's
// X500Principal.getName(RFC2253), the form Kafka maps: the most specific
// RDN first ("CN=alice,OU=eng,O=Example,C=US"), RFC 4514 escaping.
func SubjectDN(cert *x509.Certificate) string {
	return cert.Subject.ToRDNSequence().String()
}
