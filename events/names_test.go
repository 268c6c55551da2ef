package events

import (
	"errors"
	"testing"
)

// Issue 17 part 5: a consumer or a stream could be named "." or "..",
// which a path segment cannot carry (routers and clients resolve it
// away). Every native resource refuses them in its domain rules, so every
// entry (HTTP, CLI, later Kafka) does.
func TestDotNamesRefused(t *testing.T) {
	for _, name := range []string{".", ".."} {
		if err := ValidateStream(name); !errors.Is(err, ErrInvalidStream) {
			t.Errorf("ValidateStream(%q) = %v, want ErrInvalidStream", name, err)
		}
		if err := ValidateConsumerName(name); !errors.Is(err, ErrInvalidConsumerName) {
			t.Errorf("ValidateConsumerName(%q) = %v, want ErrInvalidConsumerName", name, err)
		}
		if err := ValidateStoreName(name); !errors.Is(err, ErrInvalidStoreName) {
			t.Errorf("ValidateStoreName(%q) = %v, want ErrInvalidStoreName", name, err)
		}
	}
	for _, name := range []string{"...", ".a", "a.", "a..b"} {
		if err := ValidateStream(name); err != nil {
			t.Errorf("ValidateStream(%q) = %v", name, err)
		}
		if err := ValidateConsumerName(name); err != nil {
			t.Errorf("ValidateConsumerName(%q) = %v", name, err)
		}
	}
}
