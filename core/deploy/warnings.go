package deploy

import (
	"fmt"
	"io"
	"maps"
	"regexp"
	"slices"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
	"go.yaml.in/yaml/v4"
)

// compose-go reports warnings through logrus's global logger, which would
// print raw `time=… level=warning msg=…` lines. While a compose file loads,
// those entries are collected instead and become App warnings, printed as
// one tidy line each naming the Service and key they concern.

var composeLogMu sync.Mutex

var unsetVarRE = regexp.MustCompile(`^The "([^"]+)" variable is not set\. Defaulting to a blank string\.$`)

type warnCollector struct{ msgs []string }

func (c *warnCollector) Levels() []logrus.Level {
	return []logrus.Level{logrus.PanicLevel, logrus.FatalLevel, logrus.ErrorLevel, logrus.WarnLevel}
}

func (c *warnCollector) Fire(e *logrus.Entry) error {
	c.msgs = append(c.msgs, e.Message)
	return nil
}

// captureComposeWarnings runs f with compose-go's log collected; compose
// is the file's text, which locates each warning's Service and key.
func captureComposeWarnings(compose []byte, f func() error) ([]string, error) {
	composeLogMu.Lock()
	defer composeLogMu.Unlock()
	l := logrus.StandardLogger()
	out := l.Out
	c := &warnCollector{}
	hooks := l.ReplaceHooks(logrus.LevelHooks{})
	l.AddHook(c)
	l.SetOutput(io.Discard)
	defer func() {
		l.SetOutput(out)
		l.ReplaceHooks(hooks)
	}()
	err := f()
	return tidyWarnings(c.msgs, scalarsOf(compose)), err
}

var (
	versionRE = regexp.MustCompile("the attribute `version` is obsolete")
	boolRE    = regexp.MustCompile(`^"([^"]*)" for boolean is not supported by YAML 1\.2, please use ` + "`(true|false)`$")
)

// tidyWarnings dedupes messages (the file is read twice) and rewrites
// the ones it knows to name where in the file they come from: an unset
// variable lists the Service keys using it.
func tidyWarnings(msgs []string, at []scalar) []string {
	var out []string
	seen := map[string]bool{}
	for _, m := range msgs {
		m = strings.TrimSpace(m)
		if seen[m] || m == "" {
			continue
		}
		seen[m] = true
		switch {
		case unsetVarRE.MatchString(m):
			v := unsetVarRE.FindStringSubmatch(m)[1]
			out = append(out, fmt.Sprintf("variable %s is not set, so a blank string is used%s", v, where(at, func(s string) bool { return usesVar(s, v) })))
		case versionRE.MatchString(m):
			out = append(out, `top-level key "version" is obsolete and ignored (as Docker Compose ignores it)`)
		case boolRE.MatchString(m):
			b := boolRE.FindStringSubmatch(m)
			out = append(out, fmt.Sprintf("%q is read as %s; YAML 1.2 writes %s%s", b[1], b[2], b[2], where(at, func(s string) bool { return s == b[1] })))
		default:
			out = append(out, "compose file: "+m)
		}
	}
	return out
}

// scalar is one string value of the compose file and where it is.
type scalar struct {
	service string // "" at the top level
	key     string // dotted path below the service (or the top level)
	value   string
}

// scalarsOf lists the file's string values with their Service and key;
// a file that does not parse lists none (the loader reports it).
func scalarsOf(compose []byte) []scalar {
	var doc map[string]any
	if yaml.Unmarshal(compose, &doc) != nil {
		return nil
	}
	var out []scalar
	var walk func(svc, key string, v any)
	walk = func(svc, key string, v any) {
		join := func(k string) string {
			if key == "" {
				return k
			}
			return key + "." + k
		}
		switch t := v.(type) {
		case map[string]any:
			for _, k := range slices.Sorted(maps.Keys(t)) {
				walk(svc, join(k), t[k])
			}
		case []any:
			for i, e := range t {
				walk(svc, fmt.Sprintf("%s[%d]", key, i), e)
			}
		case string:
			out = append(out, scalar{service: svc, key: key, value: t})
		}
	}
	for _, k := range slices.Sorted(maps.Keys(doc)) {
		if svcs, ok := doc[k].(map[string]any); ok && k == "services" {
			for _, name := range slices.Sorted(maps.Keys(svcs)) {
				walk(name, "", svcs[name])
			}
			continue
		}
		walk("", k, doc[k])
	}
	return out
}

// where names the places whose value matches, as ": service "web" key
// "environment.A", ...", or "" when none is found.
func where(at []scalar, match func(string) bool) string {
	var places []string
	for _, s := range at {
		if !match(s.value) {
			continue
		}
		if s.service == "" {
			places = append(places, fmt.Sprintf("top-level key %q", s.key))
		} else {
			places = append(places, fmt.Sprintf("service %q key %q", s.service, s.key))
		}
	}
	if len(places) == 0 {
		return ""
	}
	return " (" + strings.Join(places, ", ") + ")"
}

// usesVar reports whether s interpolates variable v ($v or ${v...}).
func usesVar(s, v string) bool {
	re := regexp.MustCompile(`(^|[^$])\$(\{` + regexp.QuoteMeta(v) + `([^A-Za-z0-9_]|$)|` + regexp.QuoteMeta(v) + `([^A-Za-z0-9_]|$))`)
	return re.MatchString(s)
}
