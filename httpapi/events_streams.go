package httpapi

import (
	"net/http"
	"strconv"

	"github.com/vibemq/broker/events"
)

// handleListStreams lists a store's streams by name, one page at a time:
// GET /v1/stores/{store}/streams?after=&prefix=&limit= (default 100, at
// most events.StreamsPageMax), next naming the after of the next page.
func (api *eventsAPI) handleListStreams(w http.ResponseWriter, r *http.Request) {
	st, ok := api.store(w, r)
	if !ok {
		return
	}
	q := r.URL.Query()
	limit := 100
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 || n > events.StreamsPageMax {
			writeNativeError(w, newNativeError("out_of_range", "limit must be an integer from 1 to %d, not %q", events.StreamsPageMax, v).with("field", "limit"))
			return
		}
		limit = n
	}
	infos, next, err := st.Streams(q.Get("after"), q.Get("prefix"), limit)
	if err != nil {
		writeNativeError(w, eventsError(err))
		return
	}
	out := struct {
		Streams []streamInfoJSON `json:"streams"`
		Next    string           `json:"next,omitempty"`
	}{Streams: make([]streamInfoJSON, 0, len(infos)), Next: next}
	for _, i := range infos {
		out.Streams = append(out.Streams, toStreamInfoJSON(i))
	}
	writeJSON(w, http.StatusOK, out)
}
