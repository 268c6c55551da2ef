package httpapi

import (
	"net/http"

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
	limit, ne := queryInt(r, "limit", 100, 1, events.StreamsPageMax)
	if ne != nil {
		writeError(w, ne)
		return
	}
	infos, next, err := st.Streams(q.Get("after"), q.Get("prefix"), int(limit))
	if err != nil {
		writeError(w, err)
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
