package compattests

import (
	"testing"

	"github.com/twmb/franz-go/pkg/kerr"
	"github.com/twmb/franz-go/pkg/kmsg"
)

// TestApiVersions: ApiVersions v0, v3 and v4 decode and agree; an unknown
// version (99) gets a v0-format UNSUPPORTED_VERSION response carrying the
// supported ApiVersions range, and the connection stays usable (KIP-511).
func TestApiVersions(t *testing.T) {
	t.Parallel()
	b := startBroker(t)
	c := dialRaw(t, b.Addr())

	checkKeys := func(t *testing.T, what string, resp *kmsg.ApiVersionsResponse) map[int16][2]int16 {
		t.Helper()
		if resp.ErrorCode != 0 {
			t.Fatalf("%s: %s", what, errName(resp.ErrorCode))
		}
		out := make(map[int16][2]int16)
		for _, k := range resp.ApiKeys {
			if _, dup := out[k.ApiKey]; dup {
				t.Errorf("%s: key %d (%s) listed twice", what, k.ApiKey, kmsg.NameForKey(k.ApiKey))
			}
			if k.MinVersion < 0 || k.MinVersion > k.MaxVersion {
				t.Errorf("%s: %s range v%d-v%d is inverted or negative", what, kmsg.NameForKey(k.ApiKey), k.MinVersion, k.MaxVersion)
			}
			out[k.ApiKey] = [2]int16{k.MinVersion, k.MaxVersion}
		}
		for _, need := range []kmsg.Key{kmsg.Produce, kmsg.Fetch, kmsg.ListOffsets, kmsg.Metadata, kmsg.ApiVersions,
			kmsg.CreateTopics, kmsg.DeleteTopics, kmsg.InitProducerID} {
			if _, ok := out[int16(need)]; !ok {
				t.Errorf("%s: %s not advertised", what, kmsg.NameForKey(int16(need)))
			}
		}
		if r := out[int16(kmsg.ApiVersions)]; r[0] != 0 || r[1] < 3 {
			t.Errorf("%s: ApiVersions range v%d-v%d; want v0 through at least v3", what, r[0], r[1])
		}
		if r, ok := out[int16(kmsg.Produce)]; ok && (r[0] > 3 || r[1] < 3) {
			t.Errorf("%s: Produce range v%d-v%d does not include v3 (RecordBatch)", what, r[0], r[1])
		}
		if r, ok := out[int16(kmsg.Fetch)]; ok && (r[0] > 4 || r[1] < 4) {
			t.Errorf("%s: Fetch range v%d-v%d does not include v4 (RecordBatch)", what, r[0], r[1])
		}
		return out
	}

	req0 := kmsg.NewPtrApiVersionsRequest()
	req0.Version = 0
	v0 := checkKeys(t, "ApiVersions v0", c.roundTrip(req0).(*kmsg.ApiVersionsResponse))

	maxV := v0[int16(kmsg.ApiVersions)][1]
	for _, v := range []int16{1, 2, 3, 4} {
		if v > maxV {
			continue
		}
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = v
		req.ClientSoftwareName = "compat-tests"
		req.ClientSoftwareVersion = "1.0.0"
		resp := c.roundTrip(req).(*kmsg.ApiVersionsResponse)
		got := checkKeys(t, "ApiVersions v"+string(rune('0'+v)), resp)
		if len(got) != len(v0) {
			t.Errorf("ApiVersions v%d lists %d keys, v0 listed %d", v, len(got), len(v0))
		}
		for k, r := range v0 {
			if got[k] != r {
				t.Errorf("ApiVersions v%d: %s range %v, v0 said %v", v, kmsg.NameForKey(k), got[k], r)
			}
		}
		if resp.ThrottleMillis != 0 {
			t.Errorf("ApiVersions v%d: throttle %d ms", v, resp.ThrottleMillis)
		}
	}

	t.Run("unknown-version", func(t *testing.T) {
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 99
		req.ClientSoftwareName = "compat-tests"
		req.ClientSoftwareVersion = "1.0.0"
		corr := c.send(req)
		body, err := c.readFrame()
		if err != nil {
			t.Fatalf("ApiVersions v99: no response (%v); KIP-511 wants a v0 UNSUPPORTED_VERSION response", err)
		}
		resp := kmsg.NewPtrApiVersionsResponse()
		resp.Version = 0
		decodeResponse(t, corr, body, resp)
		if resp.ErrorCode != kerr.UnsupportedVersion.Code {
			t.Errorf("ApiVersions v99: error %s, want UNSUPPORTED_VERSION", errName(resp.ErrorCode))
		}
		// KIP-511: the range of ApiVersions alone (Kafka lists no other).
		if len(resp.ApiKeys) != 1 || resp.ApiKeys[0].ApiKey != int16(kmsg.ApiVersions) {
			t.Fatalf("ApiVersions v99 response: keys %+v, want only ApiVersions", resp.ApiKeys)
		}
		if k := resp.ApiKeys[0]; k.MinVersion != 0 || k.MaxVersion != maxV {
			t.Errorf("ApiVersions v99 response: ApiVersions v%d-v%d, want v0-v%d", k.MinVersion, k.MaxVersion, maxV)
		}
		// The client retries on the same connection with a version it knows.
		retry := kmsg.NewPtrApiVersionsRequest()
		retry.Version = maxV
		retry.ClientSoftwareName = "compat-tests"
		retry.ClientSoftwareVersion = "1.0.0"
		checkKeys(t, "ApiVersions retry after v99", c.roundTrip(retry).(*kmsg.ApiVersionsResponse))
	})

	t.Run("invalid-client-software-name", func(t *testing.T) {
		if maxV < 3 {
			t.Skip("ApiVersions v3 not served")
		}
		// KIP-511: name and version must match
		// [a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?; otherwise INVALID_REQUEST.
		cc := dialRaw(t, b.Addr())
		req := kmsg.NewPtrApiVersionsRequest()
		req.Version = 3
		req.ClientSoftwareName = "bad name!"
		req.ClientSoftwareVersion = "1.0.0"
		resp := cc.roundTrip(req).(*kmsg.ApiVersionsResponse)
		if resp.ErrorCode != kerr.InvalidRequest.Code {
			t.Errorf("ApiVersions v3 with client software name %q: %s, want INVALID_REQUEST", req.ClientSoftwareName, errName(resp.ErrorCode))
		}
	})
}
