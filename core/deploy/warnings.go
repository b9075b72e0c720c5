package deploy

import (
	"fmt"
	"io"
	"regexp"
	"sort"
	"strings"
	"sync"

	"github.com/sirupsen/logrus"
)

// compose-go reports warnings through logrus's global logger, which would
// print raw `time=… level=warning msg=…` lines. While a compose file loads,
// those entries are collected instead and become App warnings, printed as
// one tidy line each; unset variables are listed once, together.

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

// captureComposeWarnings runs f with compose-go's log collected.
func captureComposeWarnings(f func() error) ([]string, error) {
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
	return tidyWarnings(c.msgs), err
}

// tidyWarnings dedupes messages (the file is read twice) and folds every
// unset variable into one line.
func tidyWarnings(msgs []string) []string {
	var unset, out []string
	seen := map[string]bool{}
	for _, m := range msgs {
		m = strings.TrimSpace(m)
		if seen[m] || m == "" {
			continue
		}
		seen[m] = true
		if v := unsetVarRE.FindStringSubmatch(m); v != nil {
			unset = append(unset, v[1])
			continue
		}
		out = append(out, m)
	}
	if len(unset) > 0 {
		sort.Strings(unset)
		out = append(out, fmt.Sprintf("variables not set, used as blank strings: %s", strings.Join(unset, ", ")))
	}
	return out
}
