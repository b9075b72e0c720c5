package benchdoc

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strings"
	"time"
)

// Result is one benchmark's line of `go test -bench` output plus what it
// logged (its "--- BENCH:" lines).
type Result struct {
	Name    string   // without the -GOMAXPROCS suffix
	Metrics []Metric // in the order printed
	Log     []string
}

// Metric is one value/unit pair of a result line.
type Metric struct {
	Value string
	Unit  string
}

var (
	resultLine = regexp.MustCompile(`^(Benchmark\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)
	benchHead  = regexp.MustCompile(`^--- (?:BENCH|SKIP|FAIL): (Benchmark\S+?)(?:-\d+)?$`)
	logLine    = regexp.MustCompile(`^\s+\S+\.go:\d+: (.*)$`)
)

// Parse reads `go test -bench` output (any number of packages) and
// returns the results by name; a benchmark run twice keeps its last.
func Parse(r io.Reader) (map[string]*Result, error) {
	out := map[string]*Result{}
	get := func(name string) *Result {
		if out[name] == nil {
			out[name] = &Result{Name: name}
		}
		return out[name]
	}
	var logging *Result
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if m := resultLine.FindStringSubmatch(line); m != nil {
			res := get(m[1])
			res.Metrics = parseMetrics(m[2])
			logging = nil
			continue
		}
		if m := benchHead.FindStringSubmatch(line); m != nil {
			logging = get(m[1])
			logging.Log = nil
			continue
		}
		if m := logLine.FindStringSubmatch(line); m != nil && logging != nil {
			logging.Log = append(logging.Log, m[1])
			continue
		}
		logging = nil
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read benchmark output: %w", err)
	}
	for k, r := range out {
		if len(r.Metrics) == 0 {
			delete(out, k) // skipped or failed: keep the document's figures
		}
	}
	return out, nil
}

func parseMetrics(s string) []Metric {
	f := strings.Fields(s)
	var out []Metric
	for i := 0; i+1 < len(f); i += 2 {
		out = append(out, Metric{Value: f[i], Unit: f[i+1]})
	}
	return out
}

var block = regexp.MustCompile(`(?s)<!-- bench:(\S+) -->\n.*?<!-- /bench:(\S+) -->`)

// Rewrite replaces the content of every block of doc whose benchmark is
// in results; it returns the new document and the names it rewrote. A
// block whose closing name differs from its opening is an error.
func Rewrite(doc string, results map[string]*Result, command string, now time.Time) (string, []string, error) {
	var done []string
	var bad error
	out := block.ReplaceAllStringFunc(doc, func(b string) string {
		m := block.FindStringSubmatch(b)
		if m[1] != m[2] {
			bad = fmt.Errorf("block <!-- bench:%s --> is closed by <!-- /bench:%s -->", m[1], m[2])
			return b
		}
		res, ok := results[m[1]]
		if !ok {
			return b
		}
		done = append(done, m[1])
		return "<!-- bench:" + m[1] + " -->\n" + render(res, command, now) + "<!-- /bench:" + m[1] + " -->"
	})
	return out, done, bad
}

// render is one block's content: the date and command, the metrics as a
// table, then what the benchmark logged.
func render(r *Result, command string, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "Last run %s by `%s`:\n\n| %s | value |\n|---|---|\n", now.UTC().Format("2006-01-02"), command, r.Name)
	for _, m := range r.Metrics {
		fmt.Fprintf(&b, "| %s | %s |\n", m.Unit, m.Value)
	}
	if len(r.Log) > 0 {
		b.WriteString("\n```\n")
		for _, l := range r.Log {
			b.WriteString(l + "\n")
		}
		b.WriteString("```\n")
	}
	return b.String()
}
