package auth

import (
	"crypto/hmac"
	"crypto/rand"
	"encoding/base64"
	"strconv"
	"strings"
)

// The SCRAM server messages (RFC 5802 section 7), as Kafka's
// ScramSaslServer reads and writes them:
//
//	client-first  gs2-header client-first-bare, gs2-header "n,," or "y,," with
//	              an optional "a=authzid"; bare "n=user,r=c-nonce[,ext...]"
//	server-first  "r=c-nonce s-nonce,s=base64(salt),i=iterations"
//	client-final  "c=base64(gs2-header),r=nonce[,ext...],p=base64(proof)"
//	server-final  "v=base64(ServerSignature)"
//
// Compatibility: the client-final nonce must END with the server-first
// nonce, not equal it, as Kafka checks (ScramSaslServer,
// clientFinalMessage.nonce().endsWith(...)): librdkafka sends its client
// nonce again in front of the whole nonce, and Kafka accepts that. The fresh
// server nonce still ends the string, so a replayed client-final never
// matches.

// serverNonceBytes is the randomness of the server's part of the nonce.
const serverNonceBytes = 24

func (s *scramSession) clientFirst(msg string) (string, error) {
	var gs2, rest, authz string
	switch {
	case strings.HasPrefix(msg, "n,"), strings.HasPrefix(msg, "y,"):
		i := strings.IndexByte(msg[2:], ',')
		if i < 0 {
			return "", failed("the SCRAM client-first message has no gs2 header")
		}
		field := msg[2 : 2+i]
		gs2, rest = msg[:2+i+1], msg[2+i+1:]
		if field != "" {
			// Checked against the user below (Kafka: the authorization id
			// must be the user).
			name, ok := decodeSaslName(strings.TrimPrefix(field, "a="))
			if !strings.HasPrefix(field, "a=") || !ok {
				return "", failed("the SCRAM gs2 header has a malformed authorization id")
			}
			authz = name
		}
	case strings.HasPrefix(msg, "p="):
		return "", failed("SCRAM channel binding is not supported (client-first message starts with p=)")
	default:
		return "", failed("the SCRAM client-first message does not start with a gs2 header (n,, or y,,); the exchange may be out of order")
	}
	attrs := strings.Split(rest, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "n=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", failed("the SCRAM client-first message is not n=user,r=nonce")
	}
	for _, a := range attrs[2:] {
		if strings.HasPrefix(a, "m=") {
			return "", failed("the SCRAM client-first message has a mandatory extension the broker does not know")
		}
	}
	user, ok := decodeSaslName(attrs[0][2:])
	if !ok || user == "" || len(user) > MaxUserNameBytes {
		return "", failed("the SCRAM user name is empty, too long or malformed")
	}
	s.user = user
	if authz != "" && authz != user {
		return "", failed("the authorization id differs from the user name")
	}
	cnonce := attrs[1][2:]
	if cnonce == "" || strings.ContainsAny(cnonce, ",") {
		return "", failed("the SCRAM client nonce is empty")
	}
	cred, ok := s.store.Lookup(user, s.m)
	if !ok {
		return "", failed("invalid credentials")
	}
	var random [serverNonceBytes]byte
	_, _ = rand.Read(random[:])
	s.gs2Header, s.clientBare, s.cred = gs2, rest, cred
	s.nonce = cnonce + base64.RawURLEncoding.EncodeToString(random[:])
	s.serverFirst = "r=" + s.nonce + ",s=" + base64.StdEncoding.EncodeToString(cred.Salt) + ",i=" + strconv.Itoa(cred.Iterations)
	return s.serverFirst, nil
}

func (s *scramSession) clientFinal(msg string) (string, error) {
	i := strings.LastIndex(msg, ",p=")
	if i < 0 {
		return "", failed("the SCRAM client-final message has no proof; the exchange may be out of order")
	}
	withoutProof, proofB64 := msg[:i], msg[i+3:]
	attrs := strings.Split(withoutProof, ",")
	if len(attrs) < 2 || !strings.HasPrefix(attrs[0], "c=") || !strings.HasPrefix(attrs[1], "r=") {
		return "", failed("the SCRAM client-final message is not c=binding,r=nonce,p=proof; the exchange may be out of order")
	}
	binding, err := base64.StdEncoding.DecodeString(attrs[0][2:])
	if err != nil || string(binding) != s.gs2Header {
		return "", failed("the SCRAM channel binding does not match the gs2 header of the client-first message")
	}
	if !strings.HasSuffix(attrs[1][2:], s.nonce) {
		return "", failed("the SCRAM client-final nonce does not end with the nonce the server sent (a replayed or mismatched message)")
	}
	proof, err := base64.StdEncoding.DecodeString(proofB64)
	if err != nil || len(proof) != s.m.size() {
		return "", failed("the SCRAM proof is malformed")
	}
	authMessage := []byte(s.clientBare + "," + s.serverFirst + "," + withoutProof)
	clientSignature := hmacBytes(s.m, s.cred.StoredKey, authMessage)
	clientKey := make([]byte, len(proof))
	for j := range proof {
		clientKey[j] = proof[j] ^ clientSignature[j]
	}
	h := s.m.hash()()
	h.Write(clientKey)
	if !hmac.Equal(h.Sum(nil), s.cred.StoredKey) {
		return "", failed("invalid credentials")
	}
	return "v=" + base64.StdEncoding.EncodeToString(hmacBytes(s.m, s.cred.ServerKey, authMessage)), nil
}

func hmacBytes(m Mechanism, key, msg []byte) []byte {
	h := hmac.New(m.hash(), key)
	h.Write(msg)
	return h.Sum(nil)
}

// decodeSaslName undoes RFC 5802's escaping of user names: "=2C" is ","
// and "=3D" is "="; any other "=" is malformed.
func decodeSaslName(s string) (string, bool) {
	if !strings.Contains(s, "=") {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '=' {
			b.WriteByte(s[i])
			continue
		}
		switch {
		case strings.HasPrefix(s[i:], "=2C"):
			b.WriteByte(',')
		case strings.HasPrefix(s[i:], "=3D"):
			b.WriteByte('=')
		default:
			return "", false
		}
		i += 2
	}
	return b.String(), true
}
