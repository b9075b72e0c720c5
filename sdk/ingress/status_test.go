package ingress

import (
	"bytes"
	"encoding/json"
	"os"
	"testing"
)

// TestStatusFixture pins the status file (a frozen format): the fixture,
// written when these types lived in core/rpc (off and options added
// since, redirect_to with them), decodes and encodes back to the same bytes; a file from a newer ingress with fields this version
// does not know still reads.
func TestStatusFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/status.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc map[string]Status
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	st := doc["status"]
	if !st.Running || len(st.Routes) != 2 || st.Routes[1].Key() != "tcp/5432" || st.Routes[0].State != RoutePublished ||
		st.Certificates[0].State != CertIssued || st.Pointers["demo/web"] != "p1" {
		t.Fatalf("status: %+v", st)
	}
	if !doc["off"].Off || doc["off"].Running {
		t.Fatalf("off: %+v", doc["off"])
	}
	opts := doc["options"].Routes
	if len(opts) != 3 || opts[2].RedirectTo != "example.com" || opts[2].Key() != "www.example.com" || opts[0].Key() != "*.example.com/api" || !opts[0].StripPrefix || opts[0].RedirectHTTPS == nil || *opts[0].RedirectHTTPS ||
		opts[1].MaxBodyBytes != 10<<20 || opts[1].ResponseTimeoutMS != 90000 || opts[1].Headers.Request.Set["X-Env"] != "prod" ||
		opts[1].BasicAuth.Users["alice"] != "" || len(opts[1].BasicAuth.Users) != 1 || !opts[1].Compress {
		t.Fatalf("route options: %+v", opts)
	}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(append(out, '\n'), b) {
		t.Fatalf("re-encoded status differs from the fixture:\n%s", out)
	}
	var newer Status
	if err := json.Unmarshal([]byte(`{"machine_id":"m3","running":true,"later_field":{"x":1},"routes":[{"hostname":"a.example.com","owner":"d/a","state":"pending","later":true}]}`), &newer); err != nil || newer.Routes[0].State != RoutePending {
		t.Fatalf("a newer status file: %+v %v", newer, err)
	}
}
