package broker_test

import (
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/vibemq/broker"

// forbidden lists, per package, imports that break the architecture's
// direction (shared/design/ARCHITECTURE.md): arrows point down only, only
// pebblestore imports Pebble, the native-queue domains know no Kafka, and
// no domain knows HTTP (the native wire format, statuses included, is
// httpapi's).
var forbidden = map[string][]string{
	"topics":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"groups":     {"/kafkaproto", "/httpapi", "/retention", "/txns", "/queues", "/events", "/cmd/", "net/http"},
	"queues":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"events":     {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"txns":       {"/kafkaproto", "/httpapi", "/retention", "/groups", "/queues", "/events", "/cmd/", "net/http"},
	"retention":  {"/kafkaproto", "/httpapi", "/cmd/"},
	"kafkaproto": {"/httpapi", "/cmd/"},
	"httpapi":    {"/kafkaproto", "/cmd/"},
	// auth (credentials, principals, TLS files) serves both edges: it knows
	// neither wire format nor any domain.
	"auth":        {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/", "github.com/twmb/franz-go", "net/http"},
	"pebblestore": {"/topics", "/groups", "/queues", "/events", "/txns", "/kafkaproto", "/httpapi", "/retention", "/cmd/", "/auth"},
}

// TestImportRules enforces the package dependency rules with `go list`.
func TestImportRules(t *testing.T) {
	out, err := exec.Command("go", "list", "-json", "./...").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	dec := json.NewDecoder(strings.NewReader(string(out)))
	seen := 0
	for {
		var pkg struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&pkg); err == io.EOF {
			break
		} else if err != nil {
			t.Fatal(err)
		}
		seen++
		rel := strings.TrimPrefix(strings.TrimPrefix(pkg.ImportPath, module), "/")
		top := strings.SplitN(rel, "/", 2)[0]
		for _, imp := range pkg.Imports {
			if strings.HasPrefix(imp, "github.com/cockroachdb/pebble") && top != "pebblestore" {
				t.Errorf("%s imports %s: only pebblestore may import Pebble", pkg.ImportPath, imp)
			}
			for _, bad := range forbidden[top] {
				target := bad
				if strings.HasPrefix(bad, "/") {
					target = module + bad
				}
				if strings.HasPrefix(imp, target) {
					t.Errorf("%s imports %s, against the architecture's import direction", pkg.ImportPath, imp)
				}
			}
		}
	}
	if seen < 5 {
		t.Fatalf("go list found only %d packages; the check is not looking at the module", seen)
	}
}
