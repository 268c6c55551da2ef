package httpapi

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/vibemq/broker/groups"
	"github.com/vibemq/broker/topics"
	"github.com/vibemq/broker/txns"
)

// Admin routes over the domains the Kafka protocol serves (topics, consumer
// groups, transactions), for the web console and scripts. They call the
// domain packages directly; what they compute the CLI computes over the
// Kafka protocol, with the same parameters (`broker topics`, `broker groups
// reset-offsets`, `broker transactions`):
//
//	GET    /v1/admin/overview                                     broker, log and lag totals (the console's sparklines)
//	GET    /v1/admin/topics                                       topics, paginated (after, limit, prefix, internal)
//	POST   /v1/admin/topics                                       create a topic
//	GET    /v1/admin/topics/{topic}                               partitions, offsets, sizes, configs
//	PATCH  /v1/admin/topics/{topic}/configs                       set and delete configs (IncrementalAlterConfigs)
//	DELETE /v1/admin/topics/{topic}                               delete a topic and its data
//	GET    /v1/admin/topics/{topic}/partitions/{partition}/records a page of records by offset or timestamp
//	GET    /v1/admin/groups                                       consumer groups, paginated
//	GET    /v1/admin/groups/{group}                               members, assignments, offsets and lag
//	POST   /v1/admin/groups/{group}/reset-offsets                 reset an empty group's offsets (dry run unless execute)
//	GET    /v1/admin/transactions                                 transactional IDs, paginated
//
// Every handler goes through adminRoute, the one place that touches the
// listener's JSON and error helpers.

// AdminConfig wires the admin routes. Topics is required; Groups and Txns
// add their routes when set.
type AdminConfig struct {
	Topics *topics.Manager
	Groups *groups.Coordinator
	Txns   *txns.Coordinator
	// Version and Started describe the broker on the overview.
	Version string
	Started time.Time
	// NodeID is the broker's Kafka node ID.
	NodeID int32
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Bounds of the admin routes' pages.
const (
	adminListLimitDefault = 100
	adminListLimitMax     = 1000
	adminBodyMax          = 1 << 20
	// adminRecordsMax is the most records a browse page holds and
	// adminRecordBytesMax about the most record bytes it reads.
	adminRecordsMax     = 500
	adminRecordBytesMax = 4 << 20
)

type adminAPI struct {
	cfg AdminConfig
}

// RegisterAdmin adds the admin routes. Call before Start.
func (s *Server) RegisterAdmin(cfg AdminConfig) {
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	api := &adminAPI{cfg: cfg}
	s.noteBodyLimit(adminBodyMax)
	s.Handle("GET /v1/admin/overview", adminRoute(api.overview))
	s.Handle("GET /v1/admin/topics", adminRoute(api.listTopics))
	s.Handle("POST /v1/admin/topics", adminRoute(api.createTopic))
	s.Handle("GET /v1/admin/topics/{topic}", adminRoute(api.describeTopic))
	s.Handle("PATCH /v1/admin/topics/{topic}/configs", adminRoute(api.alterTopicConfigs))
	s.Handle("DELETE /v1/admin/topics/{topic}", adminRoute(api.deleteTopic))
	s.Handle("GET /v1/admin/topics/{topic}/partitions/{partition}/records", adminRoute(api.browseRecords))
	if cfg.Groups != nil {
		s.Handle("GET /v1/admin/groups", adminRoute(api.listGroups))
		s.Handle("GET /v1/admin/groups/{group}", adminRoute(api.describeGroup))
		s.Handle("POST /v1/admin/groups/{group}/reset-offsets", adminRoute(api.resetOffsets))
	}
	if cfg.Txns != nil {
		s.Handle("GET /v1/admin/transactions", adminRoute(api.listTransactions))
	}
}

// adminError is an error of an admin route: a code of nativeCodeStatus and
// a sentence saying what to do.
type adminError struct {
	code    string
	message string
	field   string
}

func (e *adminError) Error() string { return e.code + ": " + e.message }

func adminErrorf(code, field, format string, args ...any) *adminError {
	return &adminError{code: code, field: field, message: fmt.Sprintf(format, args...)}
}

// adminRequest is what an admin handler gets: the request and a strict
// JSON decoder for its body.
type adminRequest struct {
	*http.Request
	decode func(v any) error
}

// adminRoute adapts an admin handler to http.Handler. It is the one place
// the admin routes meet the listener's helpers (strict JSON decoding, the
// JSON writer, the error table): a handler returns a status and a value,
// or an error, which is mapped here (*adminError by its code, a storage
// failure by its class, a domain sentinel by adminDomainError).
func adminRoute(fn func(r adminRequest) (int, any, error)) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		decode := func(v any) error {
			if ne := decodeBody(w, r, bodyRule{limit: adminBodyMax, required: true}, v); ne != nil {
				return ne
			}
			return nil
		}
		status, body, err := fn(adminRequest{Request: r, decode: decode})
		if err == nil {
			if status == http.StatusNoContent {
				w.WriteHeader(status)
				return
			}
			writeJSON(w, status, body)
			return
		}
		var ne *nativeError
		var ae *adminError
		switch {
		case errors.As(err, &ne):
		case errors.As(err, &ae):
			ne = newNativeError(ae.code, "%s", ae.message)
			if ae.field != "" {
				ne = ne.with("field", ae.field)
			}
		case storageError(err) != nil:
			ne = storageError(err)
		default:
			ae := adminDomainError(err)
			ne = newNativeError(ae.code, "%s", ae.message)
		}
		writeError(w, ne)
	})
}

// adminDomainError maps the domains' sentinels to admin codes; the message
// is the domain's sentence.
func adminDomainError(err error) *adminError {
	code := "internal"
	switch {
	case errors.Is(err, topics.ErrUnknownTopic), errors.Is(err, topics.ErrTopicDeleted):
		code = "topic_not_found"
	case errors.Is(err, topics.ErrTopicExists):
		code = "topic_exists"
	case errors.Is(err, topics.ErrInvalidTopic):
		code = "invalid_name"
	case errors.Is(err, topics.ErrInvalidPartitions):
		code = "invalid_partitions"
	case errors.Is(err, topics.ErrInvalidConfig), errors.Is(err, topics.ErrPolicyViolation):
		code = "invalid_config"
	case errors.Is(err, topics.ErrTopicOwned):
		code = "topic_owned"
	case errors.Is(err, topics.ErrOffsetOutOfRange):
		code = "out_of_range"
	case errors.Is(err, groups.ErrGroupIDNotFound):
		code = "group_not_found"
	case errors.Is(err, groups.ErrNonEmptyGroup), errors.Is(err, groups.ErrIllegalGeneration),
		errors.Is(err, groups.ErrUnknownMemberID), errors.Is(err, groups.ErrRebalanceInProgress):
		code = "group_not_empty"
	case errors.Is(err, groups.ErrInvalidGroupID):
		code = "invalid_name"
	}
	return &adminError{code: code, message: err.Error()}
}

// pageParams reads the after, limit and prefix query parameters of a list.
func pageParams(r adminRequest) (after, prefix string, limit int, err error) {
	q := r.URL.Query()
	after, prefix, limit = q.Get("after"), q.Get("prefix"), adminListLimitDefault
	if v := q.Get("limit"); v != "" {
		n, perr := strconv.Atoi(v)
		if perr != nil || n < 1 || n > adminListLimitMax {
			return "", "", 0, adminErrorf("out_of_range", "limit", "limit must be an integer from 1 to %d, not %q", adminListLimitMax, v)
		}
		limit = n
	}
	return after, prefix, limit, nil
}

// int64Param reads an optional integer query parameter at least minimum.
func int64Param(r adminRequest, name string, minimum int64) (int64, bool, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return 0, false, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < minimum {
		return 0, false, adminErrorf("out_of_range", name, "%s must be an integer of at least %d, not %q", name, minimum, v)
	}
	return n, true, nil
}
