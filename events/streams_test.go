package events

import (
	"errors"
	"fmt"
	"testing"
)

// TestStreamsPages: streams come in name order, page by page with the
// cursor, filtered by prefix, a deleted stream listed with its state; a
// cursor past every name with the prefix is an empty last page.
func TestStreamsPages(t *testing.T) {
	e := openEnv(t, t.TempDir(), nil)
	st := e.store("shop")
	for _, s := range []string{"order-2", "cart-1", "order-1", "order-3"} {
		mustAppend(t, st, s, NoStream, e.now(), ev("Created", "1"), ev("Paid", "2"))
	}
	if _, err := st.DeleteStream("order-2", Any, false); err != nil {
		t.Fatal(err)
	}
	names := func(infos []StreamInfo) string {
		var out string
		for _, i := range infos {
			out += fmt.Sprintf("%s:%s:%d:%d ", i.Stream, i.State, i.HeadRevision, i.HeadPosition)
		}
		return out
	}
	page, next, err := st.Streams("", "", 2)
	if err != nil || names(page) != "cart-1:live:1:3 order-1:live:1:5 " || next != "order-1" {
		t.Fatalf("page 1: %s next %q %v", names(page), next, err)
	}
	page, next, err = st.Streams(next, "", 2)
	if err != nil || names(page) != "order-2:deleted:1:-1 order-3:live:1:7 " || next != "" {
		t.Fatalf("page 2: %s next %q %v", names(page), next, err)
	}
	page, _, err = st.Streams("order-1", "order-", 10)
	if err != nil || names(page) != "order-2:deleted:1:-1 order-3:live:1:7 " {
		t.Fatalf("prefix order- after order-1: %s %v", names(page), err)
	}
	page, _, err = st.Streams("a", "order-", 10)
	if err != nil || len(page) != 3 {
		t.Fatalf("prefix order- after a: %s %v", names(page), err)
	}
	page, _, err = st.Streams("z", "order-", 10)
	if err != nil || len(page) != 0 {
		t.Fatalf("prefix order- after z: %s %v", names(page), err)
	}
	if _, _, err := st.Streams("", "", 0); !errors.Is(err, ErrOutOfRange) {
		t.Fatalf("limit 0: %v", err)
	}
}
