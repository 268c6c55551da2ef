package httpapi

import (
	"context"
	"net/http"

	"github.com/vibemq/broker/auth"
)

// Short names of the ACL model's resource types and operations (auth's
// codes, Kafka's for Kafka's types) for the table below.
const (
	resourceTopic   = auth.ResourceTopic
	resourceGroup   = auth.ResourceGroup
	resourceCluster = auth.ResourceCluster
	resourceTxn     = auth.ResourceTransactionalID
	resourceQueue   = auth.ResourceQueue
	resourceStore   = auth.ResourceStore

	opRead            = auth.OpRead
	opWrite           = auth.OpWrite
	opCreate          = auth.OpCreate
	opDelete          = auth.OpDelete
	opAlter           = auth.OpAlter
	opDescribe        = auth.OpDescribe
	opDescribeConfigs = auth.OpDescribeConfigs
	opAlterConfigs    = auth.OpAlterConfigs
)

// access is what a route does, for an Authorizer: the resource type, the
// path parameter naming the resource ("" for the cluster, or a route
// whose resource is in the body), and the operation, chosen as Kafka
// chooses for the equivalent API.
type access struct {
	resource auth.ResourceType
	param    string
	op       auth.Operation
}

// foundRoutes are the routes of routeAccess whose resource the handler
// finds (a task's queue, from the task): the wrapper does not check, the
// handler does, with checkFound, once it knows the name.
var foundRoutes = map[string]bool{
	"GET /v1/tasks/{id}":    true,
	"DELETE /v1/tasks/{id}": true,
}

// listRoutes are the routes of routeAccess that list resources of their
// type: they are not refused but show only the items the principal may
// do the route's operation on (visible), as Kafka's Metadata hides the
// topics a principal may not describe.
var listRoutes = map[string]bool{
	"GET /v1/queues":             true,
	"GET /v1/stores":             true,
	"GET /v1/admin/topics":       true,
	"GET /v1/admin/groups":       true,
	"GET /v1/admin/transactions": true,
	"GET /v1/tasks":              true,
}

// routeAccess holds every route of the native API that needs an
// authorization (TestEveryRouteHasAccess keeps it complete); the open
// routes (openRoutes), /openapi.json and logout need none. A queue and an
// event store are resource types of their own: their operations (receive,
// ack, append) are not a topic's, and an ACL on them does not open the
// underlying topic to Kafka clients, nor the reverse. A queue's DLQ
// routes are the queue's. Lists show the items the principal may
// describe (listRoutes); the transactions list shows the transactional IDs
// it may describe, as Kafka's ListTransactions; the tasks list the tasks
// on a queue it may describe (a redrive task's DLQ, the queue named by the
// route that started it), and one task is its DLQ's (foundRoutes). The overview stays a Cluster route: its counts
// add up every topic, group, queue and store.
var routeAccess = map[string]access{
	// Health and profiles.
	"GET /metrics":             {resourceCluster, "", opDescribe},
	"GET /debug/pprof/":        {resourceCluster, "", opDescribe},
	"GET /debug/pprof/profile": {resourceCluster, "", opDescribe},
	"GET /debug/pprof/trace":   {resourceCluster, "", opDescribe},
	"GET /debug/pprof/symbol":  {resourceCluster, "", opDescribe},

	// Queues and their DLQs (queues.go).
	"GET /v1/queues":                                      {resourceQueue, "", opDescribe},
	"PUT /v1/queues/{queue}":                              {resourceQueue, "queue", opCreate},
	"GET /v1/queues/{queue}":                              {resourceQueue, "queue", opDescribe},
	"PATCH /v1/queues/{queue}":                            {resourceQueue, "queue", opAlter},
	"DELETE /v1/queues/{queue}":                           {resourceQueue, "queue", opDelete},
	"POST /v1/queues/{queue}/messages":                    {resourceQueue, "queue", opWrite},
	"GET /v1/queues/{queue}/messages":                     {resourceQueue, "queue", opRead},
	"GET /v1/queues/{queue}/messages/{id}":                {resourceQueue, "queue", opRead},
	"DELETE /v1/queues/{queue}/messages/{id}":             {resourceQueue, "queue", opDelete},
	"POST /v1/queues/{queue}/receive":                     {resourceQueue, "queue", opRead},
	"POST /v1/queues/{queue}/ack":                         {resourceQueue, "queue", opRead},
	"POST /v1/queues/{queue}/nack":                        {resourceQueue, "queue", opRead},
	"POST /v1/queues/{queue}/extend":                      {resourceQueue, "queue", opRead},
	"DELETE /v1/queues/{queue}/receipts/{receipt}":        {resourceQueue, "queue", opRead},
	"POST /v1/queues/{queue}/purge":                       {resourceQueue, "queue", opDelete},
	"GET /v1/queues/{queue}/stats":                        {resourceQueue, "queue", opDescribe},
	"GET /v1/queues/{queue}/dlq":                          {resourceQueue, "queue", opRead},
	"POST /v1/queues/{queue}/redrive":                     {resourceQueue, "queue", opAlter},
	"GET /v1/tasks":                                       {resourceQueue, "", opDescribe},
	"GET /v1/tasks/{id}":                                  {resourceQueue, "", opDescribe},
	"DELETE /v1/tasks/{id}":                               {resourceQueue, "", opAlter},
	"GET /v1/stores":                                      {resourceStore, "", opDescribe},
	"PUT /v1/stores/{store}":                              {resourceStore, "store", opCreate},
	"GET /v1/stores/{store}":                              {resourceStore, "store", opDescribe},
	"DELETE /v1/stores/{store}":                           {resourceStore, "store", opDelete},
	"GET /v1/stores/{store}/events":                       {resourceStore, "store", opRead},
	"GET /v1/stores/{store}/streams":                      {resourceStore, "store", opDescribe},
	"GET /v1/stores/{store}/streams/{stream}":             {resourceStore, "store", opDescribe},
	"GET /v1/stores/{store}/streams/{stream}/events":      {resourceStore, "store", opRead},
	"POST /v1/stores/{store}/streams/{stream}/events":     {resourceStore, "store", opWrite},
	"DELETE /v1/stores/{store}/streams/{stream}":          {resourceStore, "store", opDelete},
	"GET /v1/stores/{store}/consumers":                    {resourceStore, "store", opDescribe},
	"PUT /v1/stores/{store}/consumers/{consumer}":         {resourceStore, "store", opRead},
	"GET /v1/stores/{store}/consumers/{consumer}":         {resourceStore, "store", opDescribe},
	"DELETE /v1/stores/{store}/consumers/{consumer}":      {resourceStore, "store", opDelete},
	"POST /v1/stores/{store}/consumers/{consumer}/commit": {resourceStore, "store", opRead},

	// Storage administration (storage.go).
	"GET /v1/admin/storage":  {resourceCluster, "", opDescribe},
	"POST /v1/admin/backup":  {resourceCluster, "", opAlter},
	"POST /v1/admin/compact": {resourceCluster, "", opAlter},
	"POST /v1/admin/verify":  {resourceCluster, "", opAlter},

	// The cluster's status (cluster.go).
	"GET /v1/admin/cluster":               {resourceCluster, "", opDescribe},
	"POST /v1/admin/cluster/nodes":        {resourceCluster, "", opAlter},
	"DELETE /v1/admin/cluster/nodes/{id}": {resourceCluster, "", opAlter},

	// Admin routes of the console (admin*.go). Creating a topic names it
	// in the body: Cluster Create, as Kafka accepts for CreateTopics.
	"GET /v1/admin/overview":                                      {resourceCluster, "", opDescribe},
	"GET /v1/admin/topics":                                        {resourceTopic, "", opDescribe},
	"POST /v1/admin/topics":                                       {resourceCluster, "", opCreate},
	"GET /v1/admin/topics/{topic}":                                {resourceTopic, "topic", opDescribeConfigs},
	"PATCH /v1/admin/topics/{topic}/configs":                      {resourceTopic, "topic", opAlterConfigs},
	"DELETE /v1/admin/topics/{topic}":                             {resourceTopic, "topic", opDelete},
	"GET /v1/admin/topics/{topic}/partitions/{partition}/records": {resourceTopic, "topic", opRead},
	"GET /v1/admin/groups":                                        {resourceGroup, "", opDescribe},
	"GET /v1/admin/groups/{group}":                                {resourceGroup, "group", opDescribe},
	"POST /v1/admin/groups/{group}/reset-offsets":                 {resourceGroup, "group", opRead},
	"GET /v1/admin/transactions":                                  {resourceTxn, "", opDescribe},
}

// authorized wraps a route's handler: with an Authorizer configured, the
// request's principal, from the request's address, must be allowed the
// route's access (routeAccess), else 403 forbidden. It runs after the mux
// matched, so the path parameters are known. A list route is not refused:
// its handler asks visible per item. Without an Authorizer, and for
// /metrics and /debug/pprof/ with http-auth-metrics open, it is the
// handler itself.
func (s *Server) authorized(pattern string, h http.Handler) http.Handler {
	a, ok := routeAccess[pattern]
	if !ok || s.cfg.Auth.Authorizer == nil || (s.cfg.Auth.MetricsOpen && isMetricsRoute(pattern)) {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := context.WithValue(r.Context(), authorizeKey{}, func(rt auth.ResourceType, name string, op auth.Operation) error {
			return s.Authorize(r, rt, name, op)
		})
		if listRoutes[pattern] {
			ctx = context.WithValue(ctx, visibleKey{}, func(name string) bool { return s.Authorize(r, a.resource, name, a.op) == nil })
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		if foundRoutes[pattern] {
			ctx = context.WithValue(ctx, foundKey{}, func(name string) error { return s.Authorize(r, a.resource, name, a.op) })
			h.ServeHTTP(w, r.WithContext(ctx))
			return
		}
		name := auth.ClusterName
		if a.param != "" {
			name = r.PathValue(a.param)
		}
		if err := s.Authorize(r, a.resource, name, a.op); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

type visibleKey struct{}

// visible reports whether a list route's request may show the item name
// (the route's resource type and operation in routeAccess); true without
// an Authorizer.
func visible(r *http.Request, name string) bool {
	if check, ok := r.Context().Value(visibleKey{}).(func(string) bool); ok {
		return check(name)
	}
	return true
}

type foundKey struct{}

// checkFound is the check of a route whose resource the handler found
// (foundRoutes): the route's resource type and operation on name; nil, or
// 403 forbidden. Nil without an Authorizer.
func checkFound(r *http.Request, name string) error {
	if check, ok := r.Context().Value(foundKey{}).(func(string) error); ok {
		return check(name)
	}
	return nil
}

type authorizeKey struct{}

// authorizeAlso checks an operation a route needs beyond its own
// (routeAccess), on a resource named in the body: nil, or 403 forbidden.
// Nil without an Authorizer.
func authorizeAlso(r *http.Request, rt auth.ResourceType, name string, op auth.Operation) error {
	if check, ok := r.Context().Value(authorizeKey{}).(func(auth.ResourceType, string, auth.Operation) error); ok {
		return check(rt, name, op)
	}
	return nil
}

// RouteRule is what a route needs from an Authorizer (RouteRules).
type RouteRule struct {
	// Resource is the resource type; Param the path parameter naming the
	// resource ("" for the cluster); Operation Kafka's operation.
	Resource  auth.ResourceType
	Param     string
	Operation auth.Operation
	// List routes are not refused: they show the items the principal may
	// do Operation on.
	List bool
	// Found routes name no resource in the path: the handler finds it
	// (a task's queue) and checks Operation on it.
	Found bool
}

// RouteRules returns the authorization of every route that needs one,
// by mux pattern (for tests and documentation).
func RouteRules() map[string]RouteRule {
	out := make(map[string]RouteRule, len(routeAccess))
	for p, a := range routeAccess {
		out[p] = RouteRule{Resource: a.resource, Param: a.param, Operation: a.op, List: listRoutes[p], Found: foundRoutes[p]}
	}
	return out
}
