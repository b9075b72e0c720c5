package browsertest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/emulation"
	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/network"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"

	"github.com/ployz/ployz/internal/prereq"
)

// Browser is one headless Chromium tab.
type Browser struct {
	Ctx context.Context
	Dir string // where screenshots go

	mu     sync.Mutex
	errors []string
}

// chromium finds the browser: $PLOYZ_CHROMIUM, else chromium on PATH.
func chromium() string {
	if p := os.Getenv("PLOYZ_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// New starts Chromium for t, or ends t through prereq when none is
// installed. Its
// screenshots go to $PLOYZ_SCREENSHOTS/<test name> when set, else to a
// directory kept under t.TempDir's parent for the run.
func New(t *testing.T, timeout time.Duration) *Browser {
	t.Helper()
	exe := chromium()
	if exe == "" {
		prereq.Missing(t, "Chromium (packaging/prereq.sh installs it, or set PLOYZ_CHROMIUM)", errors.New("none found"))
	}
	opts := append(chromedp.DefaultExecAllocatorOptions[:], chromedp.ExecPath(exe), chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900), chromedp.Flag("disable-dev-shm-usage", true))
	actx, cancelA := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelC := chromedp.NewContext(actx)
	ctx, cancelT := context.WithTimeout(ctx, timeout)
	t.Cleanup(func() { cancelT(); cancelC(); cancelA() })
	b := &Browser{Ctx: ctx, Dir: shotDir(t)}
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium %s: %v", exe, err)
	}
	// Subscribe before any page loads; a CSP refusal is a Log entry.
	exceptions := chromedp.Events(ctx, runtime.ExceptionThrown)
	entries := chromedp.Events(ctx, cdplog.EntryAdded)
	if _, err := chromedp.Call(ctx, cdplog.Enable, cdp.Empty{}); err != nil {
		t.Fatalf("enable the page log: %v", err)
	}
	go func() {
		for ev, err := range exceptions {
			if err != nil {
				return
			}
			d := ev.ExceptionDetails
			msg := d.Text
			if d.Exception != nil {
				msg += " " + d.Exception.Description
			}
			b.note(fmt.Sprintf("exception at %s:%d: %s", d.URL, d.LineNumber, msg))
		}
	}()
	go func() {
		for ev, err := range entries {
			if err != nil {
				return
			}
			if ev.Entry.Level == cdplog.EntryLevelError && !hostNetworkChanged(ev.Entry) {
				b.note(fmt.Sprintf("%s error: %s (%s)", ev.Entry.Source, ev.Entry.Text, ev.Entry.URL))
			}
		}
	}()
	return b
}

// hostNetworkChanged: Chromium aborts the requests in flight with
// ERR_NETWORK_CHANGED when the host's interfaces change, as they do when
// Docker adds a veth for a concurrent build or lab (make test builds the
// VM image beside the unit tests). That is the host's doing, not the
// page's; every other failed load still counts.
func hostNetworkChanged(e *cdplog.Entry) bool {
	return e.Source == cdplog.EntrySourceNetwork && strings.Contains(e.Text, "net::ERR_NETWORK_CHANGED")
}

func shotDir(t *testing.T) string {
	dir := os.Getenv("PLOYZ_SCREENSHOTS")
	if dir == "" {
		dir = t.TempDir()
	} else {
		dir = filepath.Join(dir, strings.ReplaceAll(t.Name(), "/", "_"))
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func (b *Browser) note(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.errors = append(b.errors, s)
}

// Errors are the page's exceptions and console errors so far.
func (b *Browser) Errors() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.errors...)
}

// Do runs actions, failing t with what step failed. The pages re-render
// their live regions on every update, so a node found by a query can be
// replaced before the click reaches it; a person's click would land on
// the new node at the same place, so Do runs the actions again (a few
// times) when Chromium reports the queried node gone.
func (b *Browser) Do(t *testing.T, what string, actions ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	err := chromedp.Do(b.Ctx, actions...)
	for try := 0; try < 5 && err != nil && staleNode(err) && b.Ctx.Err() == nil; try++ {
		time.Sleep(50 * time.Millisecond)
		err = chromedp.Do(b.Ctx, actions...)
	}
	if err != nil {
		b.Shot(t, "failed-"+strings.ReplaceAll(what, " ", "-"))
		t.Fatalf("%s: %v (page errors: %v)", what, err, b.Errors())
	}
}

// staleNode is Chromium's answer for a node removed after it was queried.
func staleNode(err error) bool {
	msg := err.Error()
	return strings.Contains(msg, "Could not find node with given id") || strings.Contains(msg, "No node with given id")
}

// Shot writes a full-page screenshot named name.png and logs its path.
func (b *Browser) Shot(t *testing.T, name string) string {
	t.Helper()
	png, err := chromedp.Run(b.Ctx, chromedp.FullScreenshot(100)) // 100: PNG
	if err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	p := filepath.Join(b.Dir, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		t.Logf("screenshot %s: %v", name, err)
		return ""
	}
	t.Logf("screenshot: %s", p)
	return p
}

// Text is the text of the first node matching the CSS selector sel. It
// is read in one page-side evaluation: a node id fetched first could be
// gone (a live re-render) before its text is asked for.
func (b *Browser) Text(t *testing.T, sel string) string {
	t.Helper()
	expr := fmt.Sprintf("(() => { const n = document.querySelector(%q); if (!n) throw new Error('no node matches ' + %q); return n.innerText; })()", sel, sel)
	s, err := chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
	if err != nil {
		b.Shot(t, "failed-text")
		t.Fatalf("read %s: %v (page errors: %v)", sel, err, b.Errors())
	}
	return s
}

// WaitText polls until document.querySelector(sel) exists and its text
// contains want.
func (b *Browser) WaitText(t *testing.T, sel, want string, within time.Duration) string {
	t.Helper()
	deadline := time.Now().Add(within)
	expr := fmt.Sprintf("(document.querySelector(%q) || {}).innerText || ''", sel)
	var s string
	var err error
	for {
		s, err = chromedp.Run(b.Ctx, chromedp.Evaluate[string](expr))
		if err == nil && strings.Contains(s, want) {
			return s
		}
		if time.Now().After(deadline) || b.Ctx.Err() != nil {
			b.Shot(t, fmt.Sprintf("timeout-%d", time.Now().Unix()))
			t.Fatalf("%s never contained %q within %s; last text %q (err %v, page errors %v)", sel, want, within, s, err, b.Errors())
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// Eval evaluates a JS expression.
func Eval[T any](t *testing.T, b *Browser, expr string) T {
	t.Helper()
	v, err := chromedp.Run(b.Ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("eval %s: %v (page errors: %v)", expr, err, b.Errors())
	}
	return v
}

// ColorScheme makes the page see prefers-color-scheme: dark (or light).
func (b *Browser) ColorScheme(t *testing.T, scheme string) {
	t.Helper()
	if _, err := chromedp.Call(b.Ctx, emulation.SetEmulatedMedia, emulation.SetEmulatedMediaParams{
		Features: []*emulation.MediaFeature{{Name: "prefers-color-scheme", Value: scheme}}}); err != nil {
		t.Fatalf("emulate %s: %v", scheme, err)
	}
}

// Cookies are the browser's cookies for url (HttpOnly ones included), as
// a Go client sends them: a test reads a cookie-bound API as this
// browser.
func (b *Browser) Cookies(t testing.TB, url string) []*http.Cookie {
	t.Helper()
	res, err := chromedp.Call(b.Ctx, network.GetCookies, network.GetCookiesParams{URLs: []string{url}})
	if err != nil {
		t.Fatalf("cookies of %s: %v", url, err)
	}
	out := make([]*http.Cookie, 0, len(res.Cookies))
	for _, c := range res.Cookies {
		out = append(out, &http.Cookie{Name: c.Name, Value: c.Value})
	}
	return out
}
