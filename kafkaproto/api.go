package kafkaproto

import (
	"fmt"
	"sort"

	"github.com/twmb/franz-go/pkg/kmsg"
)

// reply is what a handler gives back for one request.
//
// The handler runs on the connection's reader goroutine, in request order;
// work that must stay ordered (assigning offsets) happens there. Work that
// may block (waiting for an fsync, long-polling a fetch) goes in finish,
// which the writer goroutine runs in request order just before writing resp.
type reply struct {
	resp   kmsg.Response
	finish func()
	// none means no response is written (Produce with acks=0); finish still runs.
	none bool
	// release, when set, runs after resp has been encoded: buffers that resp
	// borrowed may be reused from then on.
	release func()
	// size, when set, estimates the encoded response's bytes after finish,
	// so that a large response is encoded into a buffer of the right size
	// instead of one grown by doubling.
	size func() int
	// done, when set, runs once the reply has been written to the socket
	// or dropped (write error, connection closed, none), after release,
	// always: what the response held may be accounted free from then on.
	done func()
}

// handler serves one decoded request. A returned error closes the
// connection: it is for requests the broker cannot answer at all. Domain
// failures are error codes inside the response.
type handler func(s *Server, r *request) (reply, error)

type registration struct {
	key        int16
	minVersion int16
	maxVersion int16
	handle     handler
}

var registry = map[int16]*registration{}

// register declares an API with the versions it serves. It panics on a
// duplicate key, an inverted range, or a version kmsg cannot encode, so a
// mistake fails at start-up, not on a client's request.
func register(key kmsg.Key, minVersion, maxVersion int16, h handler) *registration {
	k := int16(key)
	if _, dup := registry[k]; dup {
		panic(fmt.Sprintf("kafkaproto: API key %d registered twice", k))
	}
	if minVersion < 0 || minVersion > maxVersion {
		panic(fmt.Sprintf("kafkaproto: API key %d has inverted versions %d-%d", k, minVersion, maxVersion))
	}
	req := kmsg.RequestForKey(k)
	if req == nil || maxVersion > req.MaxVersion() {
		panic(fmt.Sprintf("kafkaproto: API key %d v%d is beyond what kmsg knows", k, maxVersion))
	}
	r := &registration{key: k, minVersion: minVersion, maxVersion: maxVersion, handle: h}
	registry[k] = r
	return r
}

// sortedRegistrations returns the registry ordered by key (for ApiVersions).
func sortedRegistrations() []*registration {
	out := make([]*registration, 0, len(registry))
	for _, r := range registry {
		out = append(out, r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	return out
}
