package httpapi

import (
	"encoding/json"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestOpenAPIQueueFields: every JSON field of the queue API's request and
// response types is a property of its schema, and a schema that refuses
// additional properties lists no field the server would refuse. A new
// attribute or request field fails here until queues.json documents it.
func TestOpenAPIQueueFields(t *testing.T) {
	raw, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"QueueAttributes":      attributesJSON{},
		"QueueAttributesPatch": attributesPatchJSON{},
		"QueueBackoff":         backoffJSON{},
		"QueueInfo":            queueInfoJSON{},
		"SendMessage":          sendMessageJSON{},
		"SendRequest":          sendRequestJSON{},
		"SendResult":           sendResultJSON{},
		"ReceiveRequest":       receiveRequestJSON{},
		"QueueMessage":         messageJSON{},
		"DeadLetterInfo":       deadLetterInfoJSON{},
		"NackRequest":          nackRequestJSON{},
		"ExtendRequest":        extendRequestJSON{},
		"ItemResult":           itemResultJSON{},
		"QueueStats":           statsJSON{},
		"RedriveRequest":       redriveRequestJSON{},
		"Task":                 taskJSON{},
		"PurgeRequest":         purgeRequestJSON{},
	} {
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		props, _ := schema["properties"].(map[string]any)
		fields := jsonFields(reflect.TypeOf(v))
		for _, f := range fields {
			if _, ok := props[f]; !ok {
				t.Errorf("%s: field %q of %T is not documented", name, f, v)
			}
		}
		if schema["additionalProperties"] == false {
			known := map[string]bool{}
			for _, f := range fields {
				known[f] = true
			}
			for p := range props {
				if !known[p] {
					t.Errorf("%s: documents %q, which %T does not accept", name, p, v)
				}
			}
		}
	}
}

// jsonFields lists the JSON names of a struct's exported fields.
func jsonFields(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if !f.IsExported() {
			continue
		}
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		if name == "" {
			name = f.Name
		}
		out = append(out, name)
	}
	sort.Strings(out)
	return out
}

// TestOpenAPIConsumerFields: every JSON field of the durable consumer
// routes' request and response types is a property of its schema, and a
// schema that refuses additional properties lists no field the server
// would refuse.
func TestOpenAPIConsumerFields(t *testing.T) {
	raw, err := OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]any
	if err := json.Unmarshal(raw, &doc); err != nil {
		t.Fatal(err)
	}
	schemas := doc["components"].(map[string]any)["schemas"].(map[string]any)
	for name, v := range map[string]any{
		"ConsumerRequest": consumerRequest{},
		"CommitRequest":   commitRequest{},
		"ConsumerInfo":    consumerJSON{},
	} {
		schema, ok := schemas[name].(map[string]any)
		if !ok {
			t.Errorf("schema %s is missing", name)
			continue
		}
		props, _ := schema["properties"].(map[string]any)
		fields := jsonFields(reflect.TypeOf(v))
		known := map[string]bool{}
		for _, f := range fields {
			known[f] = true
			if _, ok := props[f]; !ok {
				t.Errorf("%s: field %q of %T is not documented", name, f, v)
			}
		}
		for p := range props {
			if !known[p] {
				t.Errorf("%s: documents %q, which %T does not have", name, p, v)
			}
		}
	}
}
