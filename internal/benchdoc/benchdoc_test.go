package benchdoc

import (
	"strings"
	"testing"
	"time"
)

const output = `goos: linux
pkg: github.com/ployz/ployz/e2e
BenchmarkDeploy10x3-2   	       1	30123456789 ns/op	        12.50 docker-s	        10.10 ployz-s
--- BENCH: BenchmarkDeploy10x3-2
    bench_deploy_test.go:71: deploy 10x3: ployz 10.1s, plain docker 12.5s (0.81x)
BenchmarkPointQuery/raw-2    	  100000	     11000 ns/op
--- SKIP: BenchmarkIngress
    ingress_test.go:12: lab benchmark: run with make bench
PASS
`

func TestParseAndRewrite(t *testing.T) {
	res, err := Parse(strings.NewReader(output))
	if err != nil {
		t.Fatal(err)
	}
	d := res["BenchmarkDeploy10x3"]
	if d == nil || len(d.Metrics) != 3 || d.Metrics[2] != (Metric{"10.10", "ployz-s"}) || len(d.Log) != 1 {
		t.Fatalf("deploy: %+v", d)
	}
	if res["BenchmarkPointQuery/raw"] == nil || res["BenchmarkIngress"] != nil {
		t.Fatalf("results: %v", res)
	}
	doc := "# B\n\nprose\n<!-- bench:BenchmarkDeploy10x3 -->\nold figures\n<!-- /bench:BenchmarkDeploy10x3 -->\nmore prose\n" +
		"<!-- bench:BenchmarkIngress -->\nkept\n<!-- /bench:BenchmarkIngress -->\n"
	now := time.Date(2026, 12, 2, 1, 0, 0, 0, time.UTC)
	got, done, err := Rewrite(doc, res, "make bench", now)
	if err != nil || len(done) != 1 {
		t.Fatalf("rewrite: %v %v", done, err)
	}
	for _, want := range []string{"prose\n<!-- bench:BenchmarkDeploy10x3 -->\nLast run 2026-12-02 by `make bench`:", "| ployz-s | 10.10 |",
		"deploy 10x3: ployz 10.1s", "<!-- /bench:BenchmarkDeploy10x3 -->\nmore prose", "kept\n"} {
		if !strings.Contains(got, want) {
			t.Fatalf("missing %q in:\n%s", want, got)
		}
	}
	if strings.Contains(got, "old figures") {
		t.Fatal("old figures kept")
	}
	again, _, _ := Rewrite(got, res, "make bench", now)
	if again != got {
		t.Fatal("rewriting twice changed the document")
	}
	if _, _, err := Rewrite("<!-- bench:A -->\nx\n<!-- /bench:B -->", res, "c", now); err == nil {
		t.Fatal("mismatched block accepted")
	}
}
