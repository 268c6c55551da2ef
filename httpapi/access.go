package httpapi

import "net/http"

// Additional operations of Kafka's ACL model used by the native API.
const (
	OperationAlterConfigs    Operation = "AlterConfigs"
	OperationDescribeConfigs Operation = "DescribeConfigs"
)

// access is what a route does, for an Authorizer: the resource type, the
// path parameter naming the resource ("" for a list or a route whose
// resource is in the body, which the Authorizer sees with name ""), and
// the operation, chosen as Kafka chooses for the equivalent API.
type access struct {
	resource ResourceType
	param    string
	op       Operation
}

// routeAccess holds every route of the native API that needs an
// authorization (TestEveryRouteHasAccess keeps it complete); the open
// routes (openRoutes), /openapi.json and logout need none. A queue and an
// event store are resource types of their own: their operations (receive,
// ack, append) are not a topic's, and an ACL on them does not open the
// underlying topic to Kafka clients, nor the reverse. Lists answer whole
// (name ""): filtering a list per item is the authorizer's work to come.
var routeAccess = map[string]access{
	// Health and profiles.
	"GET /metrics":             {ResourceCluster, "", OperationDescribe},
	"GET /debug/pprof/":        {ResourceCluster, "", OperationDescribe},
	"GET /debug/pprof/profile": {ResourceCluster, "", OperationDescribe},
	"GET /debug/pprof/trace":   {ResourceCluster, "", OperationDescribe},
	"GET /debug/pprof/symbol":  {ResourceCluster, "", OperationDescribe},

	// Queues and their DLQs (queues.go).
	"GET /v1/queues":                                      {ResourceQueue, "", OperationDescribe},
	"PUT /v1/queues/{queue}":                              {ResourceQueue, "queue", OperationCreate},
	"GET /v1/queues/{queue}":                              {ResourceQueue, "queue", OperationDescribe},
	"PATCH /v1/queues/{queue}":                            {ResourceQueue, "queue", OperationAlter},
	"DELETE /v1/queues/{queue}":                           {ResourceQueue, "queue", OperationDelete},
	"POST /v1/queues/{queue}/messages":                    {ResourceQueue, "queue", OperationWrite},
	"GET /v1/queues/{queue}/messages":                     {ResourceQueue, "queue", OperationRead},
	"GET /v1/queues/{queue}/messages/{id}":                {ResourceQueue, "queue", OperationRead},
	"DELETE /v1/queues/{queue}/messages/{id}":             {ResourceQueue, "queue", OperationDelete},
	"POST /v1/queues/{queue}/receive":                     {ResourceQueue, "queue", OperationRead},
	"POST /v1/queues/{queue}/ack":                         {ResourceQueue, "queue", OperationRead},
	"POST /v1/queues/{queue}/nack":                        {ResourceQueue, "queue", OperationRead},
	"POST /v1/queues/{queue}/extend":                      {ResourceQueue, "queue", OperationRead},
	"DELETE /v1/queues/{queue}/receipts/{receipt}":        {ResourceQueue, "queue", OperationRead},
	"POST /v1/queues/{queue}/purge":                       {ResourceQueue, "queue", OperationDelete},
	"GET /v1/queues/{queue}/stats":                        {ResourceQueue, "queue", OperationDescribe},
	"GET /v1/queues/{queue}/dlq":                          {ResourceQueue, "queue", OperationRead},
	"POST /v1/queues/{queue}/redrive":                     {ResourceQueue, "queue", OperationAlter},
	"GET /v1/tasks":                                       {ResourceCluster, "", OperationDescribe},
	"GET /v1/tasks/{id}":                                  {ResourceCluster, "", OperationDescribe},
	"DELETE /v1/tasks/{id}":                               {ResourceCluster, "", OperationAlter},
	"GET /v1/stores":                                      {ResourceStore, "", OperationDescribe},
	"PUT /v1/stores/{store}":                              {ResourceStore, "store", OperationCreate},
	"GET /v1/stores/{store}":                              {ResourceStore, "store", OperationDescribe},
	"DELETE /v1/stores/{store}":                           {ResourceStore, "store", OperationDelete},
	"GET /v1/stores/{store}/events":                       {ResourceStore, "store", OperationRead},
	"GET /v1/stores/{store}/streams":                      {ResourceStore, "store", OperationDescribe},
	"GET /v1/stores/{store}/streams/{stream}":             {ResourceStore, "store", OperationDescribe},
	"GET /v1/stores/{store}/streams/{stream}/events":      {ResourceStore, "store", OperationRead},
	"POST /v1/stores/{store}/streams/{stream}/events":     {ResourceStore, "store", OperationWrite},
	"DELETE /v1/stores/{store}/streams/{stream}":          {ResourceStore, "store", OperationDelete},
	"GET /v1/stores/{store}/consumers":                    {ResourceStore, "store", OperationDescribe},
	"PUT /v1/stores/{store}/consumers/{consumer}":         {ResourceStore, "store", OperationRead},
	"GET /v1/stores/{store}/consumers/{consumer}":         {ResourceStore, "store", OperationDescribe},
	"DELETE /v1/stores/{store}/consumers/{consumer}":      {ResourceStore, "store", OperationDelete},
	"POST /v1/stores/{store}/consumers/{consumer}/commit": {ResourceStore, "store", OperationRead},

	// Storage administration (storage.go).
	"GET /v1/admin/storage":  {ResourceCluster, "", OperationDescribe},
	"POST /v1/admin/backup":  {ResourceCluster, "", OperationAlter},
	"POST /v1/admin/compact": {ResourceCluster, "", OperationAlter},
	"POST /v1/admin/verify":  {ResourceCluster, "", OperationAlter},

	// Admin routes of the console (admin*.go). Creating a topic names it
	// in the body: Cluster Create, as Kafka accepts for CreateTopics.
	"GET /v1/admin/overview":                                      {ResourceCluster, "", OperationDescribe},
	"GET /v1/admin/topics":                                        {ResourceTopic, "", OperationDescribe},
	"POST /v1/admin/topics":                                       {ResourceCluster, "", OperationCreate},
	"GET /v1/admin/topics/{topic}":                                {ResourceTopic, "topic", OperationDescribeConfigs},
	"PATCH /v1/admin/topics/{topic}/configs":                      {ResourceTopic, "topic", OperationAlterConfigs},
	"DELETE /v1/admin/topics/{topic}":                             {ResourceTopic, "topic", OperationDelete},
	"GET /v1/admin/topics/{topic}/partitions/{partition}/records": {ResourceTopic, "topic", OperationRead},
	"GET /v1/admin/groups":                                        {ResourceGroup, "", OperationDescribe},
	"GET /v1/admin/groups/{group}":                                {ResourceGroup, "group", OperationDescribe},
	"POST /v1/admin/groups/{group}/reset-offsets":                 {ResourceGroup, "group", OperationRead},
	"GET /v1/admin/transactions":                                  {ResourceCluster, "", OperationDescribe},
}

// authorized wraps a route's handler: with an Authorizer configured, the
// request's principal must be allowed the route's access (routeAccess),
// else 403 forbidden. It runs after the mux matched, so the path
// parameters are known. Without an Authorizer it is the handler itself.
func (s *Server) authorized(pattern string, h http.Handler) http.Handler {
	a, ok := routeAccess[pattern]
	if !ok || s.cfg.Auth.Authorizer == nil {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := ""
		if a.param != "" {
			name = r.PathValue(a.param)
		}
		if err := s.Authorize(r, a.resource, name, a.op); err != nil {
			writeError(w, err)
			return
		}
		h.ServeHTTP(w, r)
	})
}
