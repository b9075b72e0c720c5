// Dependency rules of the repository, as tests (docs/architecture.md, "Code
// layout"): what each binary may link is checked from `go list -deps`, so
// a new import that breaks a rule fails here rather than in a review.
package ployz_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// depRule forbids packages (by import-path prefix) in what pkg links when
// built for goos.
type depRule struct {
	pkg       string
	goos      string
	forbidden []string
	why       string
	// onlyVia allows a forbidden package when every package that imports
	// it is one of these (a library using it for something else).
	onlyVia map[string][]string
}

var depRules = []depRule{
	{pkg: "./cmd/ployzd", goos: "linux", why: "the daemon hosts plugins; it does not contain them",
		forbidden: []string{"github.com/caddyserver/", "github.com/mholt/caddy-l4", "github.com/miekg/dns",
			"github.com/ployz/ployz/plugins/"},
		// memberlist (the store's gossip) links miekg/dns for its own
		// DNS-based peer lookup, which serves nothing.
		onlyVia: map[string][]string{"github.com/miekg/dns": {"github.com/hashicorp/memberlist"}}},
	{pkg: "./cmd/ployz", goos: "linux", why: "the CLI runs on the operator's computer and cross-builds",
		forbidden: []string{"golang.zx2c4.com/wireguard/device", "golang.zx2c4.com/wireguard/tun",
			"github.com/vishvananda/netlink", "github.com/ployz/ployz/e2e", "github.com/ployz/ployz/plugins/",
			"github.com/ployz/ployz/core/mesh", "github.com/caddyserver/", "github.com/miekg/dns"}},
	{pkg: "./cmd/ployz", goos: "darwin", why: "the CLI runs on macOS",
		forbidden: []string{"golang.zx2c4.com/wireguard/device", "github.com/vishvananda/netlink",
			"github.com/ployz/ployz/e2e"}},
	{pkg: "./plugins/...", goos: "linux", why: "plugins talk to the daemon only through the SDK contract",
		forbidden: []string{"github.com/ployz/ployz/core/daemon", "github.com/ployz/ployz/core/pluginhost",
			"github.com/ployz/ployz/e2e"}},
	{pkg: "./core/...", goos: "linux", why: "core never imports a plugin implementation",
		forbidden: []string{"github.com/ployz/ployz/plugins/"}},
	{pkg: "./client/...", goos: "linux", why: "the operator library never prints, prompts or parses flags: a CI job or a Go program imports it",
		forbidden: []string{"github.com/spf13/cobra", "golang.org/x/term", "github.com/mattn/go-isatty",
			"github.com/schollz/progressbar", "github.com/ployz/ployz/cmd/", "github.com/ployz/ployz/plugins/",
			"github.com/ployz/ployz/e2e"},
		onlyVia: clientIsatty},
	{pkg: "./client/...", goos: "darwin", why: "the operator library runs on the operator's macOS too",
		forbidden: []string{"github.com/spf13/cobra", "golang.org/x/term", "github.com/mattn/go-isatty",
			"github.com/ployz/ployz/cmd/", "golang.zx2c4.com/wireguard/device", "github.com/vishvananda/netlink"},
		onlyVia: clientIsatty},
	{pkg: "./core/daemon/...", goos: "linux", why: "the daemon serves Machines; the operator library drives them from outside",
		forbidden: []string{"github.com/ployz/ployz/client"}},
	{pkg: "./cmd/ployzd", goos: "linux", why: "the daemon serves Machines; the operator library drives them from outside",
		forbidden: []string{"github.com/ployz/ployz/client"}},
	{pkg: "./sdk/...", goos: "linux", why: "the SDK is the contract, not an implementation",
		forbidden: []string{"github.com/ployz/ployz/plugins/", "github.com/ployz/ployz/core/daemon",
			"github.com/caddyserver/", "github.com/miekg/dns"}},
}

// clientIsatty: hclog's colours and the SQLite driver's libc ask isatty
// of their own; the operator library itself never does.
var clientIsatty = map[string][]string{"github.com/mattn/go-isatty": {"github.com/mattn/go-colorable",
	"github.com/fatih/color", "github.com/hashicorp/go-hclog", "modernc.org/libc"}}

func TestDependencyRules(t *testing.T) {
	goBin := filepath.Join(runtime.GOROOT(), "bin", "go")
	if _, err := os.Stat(goBin); err != nil {
		goBin = "go"
	}
	for _, r := range depRules {
		t.Run(r.goos+"/"+strings.Trim(r.pkg, "./"), func(t *testing.T) {
			// Test-only imports are left out: -deps lists what the
			// packages link, not what their tests do.
			cmd := exec.Command(goBin, "list", "-deps", "-f", `{{if not .Standard}}{{.ImportPath}} {{join .Imports " "}}{{end}}`, r.pkg)
			cmd.Env = append(os.Environ(), "GOOS="+r.goos, "GOARCH=amd64", "CGO_ENABLED=0")
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("go list -deps %s: %v", r.pkg, err)
			}
			var deps []string
			importers := map[string][]string{}
			for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
				f := strings.Fields(line)
				if len(f) == 0 {
					continue
				}
				deps = append(deps, f[0])
				for _, imp := range f[1:] {
					importers[imp] = append(importers[imp], f[0])
				}
			}
			if len(deps) == 0 {
				t.Fatalf("go list -deps %s listed nothing", r.pkg)
			}
			for _, d := range deps {
				for _, f := range r.forbidden {
					if under(d, f) && !allowedWithin(r.pkg, d) && !onlyVia(importers[d], r.onlyVia[f]) {
						t.Errorf("%s (GOOS=%s) links %s (imported by %v): %s", r.pkg, r.goos, d, importers[d], r.why)
					}
				}
			}
		})
	}
}

// allowedWithin: a pattern's own packages are not "imports" of it (the
// plugins rule lists plugins/, the sdk rule lists sdk/).
func allowedWithin(pattern, dep string) bool {
	root := "github.com/ployz/ployz/" + strings.TrimSuffix(strings.TrimPrefix(pattern, "./"), "/...")
	return strings.HasPrefix(dep, root)
}

// under reports whether dep is prefix or a package below it.
func under(dep, prefix string) bool {
	p := strings.TrimSuffix(prefix, "/")
	return dep == p || strings.HasPrefix(dep, p+"/")
}

func onlyVia(importers, allowed []string) bool {
	if len(allowed) == 0 || len(importers) == 0 {
		return false
	}
	for _, i := range importers {
		if !slices.Contains(allowed, i) {
			return false
		}
	}
	return true
}
