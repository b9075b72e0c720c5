// Dependency rules of the repository, as tests (docs/architecture.md, "Code
// layout"): what each binary may link is checked from `go list -deps`, so
// a new import that breaks a rule fails here rather than in a review.
package ployz_test

import (
	"os"
	"os/exec"
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
	// allow lists forbidden packages the rule still lets through, each
	// with why (coreAllowlist).
	allow map[string]string
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
	{pkg: "./plugins/...", goos: "linux", why: "plugins depend on Ployz only through the SDK contract (sdk/)",
		forbidden: []string{"github.com/ployz/ployz/core/", "github.com/ployz/ployz/e2e"}, allow: coreAllowlist},
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
	{pkg: "./sdk/...", goos: "linux", why: "the SDK is the contract, not an implementation: core imports it, never the reverse",
		forbidden: []string{"github.com/ployz/ployz/plugins/", "github.com/ployz/ployz/core/",
			"github.com/caddyserver/", "github.com/miekg/dns"}, allow: coreAllowlist},
}

// coreAllowlist is every core/ package that plugins/ and sdk/ may still
// link, with why. It should end up empty: a plugin author depends on
// sdk/ alone (docs/plugins.md).
var coreAllowlist = map[string]string{}

// coreTestAllowlist is every core/ package that the tests of plugins/ and
// sdk/ may import beyond coreAllowlist (what they link through it is not
// checked), with why.
var coreTestAllowlist = map[string]string{
	"github.com/ployz/ployz/core/store/storetest": "a real store node for tests: the store's implementation is core's, and a client's or a plugin's tests need one",
}

// clientIsatty: hclog's colours and the SQLite driver's libc ask isatty
// of their own; the operator library itself never does.
var clientIsatty = map[string][]string{"github.com/mattn/go-isatty": {"github.com/mattn/go-colorable",
	"github.com/fatih/color", "github.com/hashicorp/go-hclog", "modernc.org/libc"}}

func TestDependencyRules(t *testing.T) {
	goBin := goBinary()
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
					if under(d, f) && !allowedWithin(r.pkg, d) && !onlyVia(importers[d], r.onlyVia[f]) && r.allow[d] == "" {
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

// TestTestsImportNoCore: the tests of plugins/ and sdk/ reach core/ only
// through coreAllowlist and coreTestAllowlist. It follows every import of
// the test binaries (`go list -deps -test`) from the packages under
// plugins/ and sdk/, and stops at an allowed package.
func TestTestsImportNoCore(t *testing.T) {
	goBin := goBinary()
	cmd := exec.Command(goBin, "list", "-deps", "-test", "-f", `{{.ImportPath}}|{{join .Imports " "}}`, "./plugins/...", "./sdk/...")
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list -deps -test: %v", err)
	}
	imports := map[string][]string{}
	var roots []string
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		id, imps, _ := strings.Cut(line, "|")
		imports[id] = strings.Fields(imps)
		if p := basePath(id); under(p, "github.com/ployz/ployz/plugins") || under(p, "github.com/ployz/ployz/sdk") {
			roots = append(roots, id)
		}
	}
	if len(roots) == 0 {
		t.Fatal("go list -deps -test listed no package under plugins/ or sdk/")
	}
	for _, v := range reachedCore(roots, imports) {
		t.Errorf("the tests of plugins/ or sdk/ reach %s (via %s): only core/ packages in coreAllowlist or coreTestAllowlist may be", v.pkg, v.from)
	}
}

type coreVisit struct{ pkg, from string }

// reachedCore walks imports from roots, not into allowed packages, and
// returns the core/ packages it reaches with the package that imported
// each.
func reachedCore(roots []string, imports map[string][]string) []coreVisit {
	seen := map[string]bool{}
	var found []coreVisit
	queue := roots
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		for _, imp := range imports[id] {
			if seen[imp] {
				continue
			}
			seen[imp] = true
			p := basePath(imp)
			if coreAllowlist[p] != "" || coreTestAllowlist[p] != "" {
				continue
			}
			if under(p, "github.com/ployz/ployz/core") {
				found = append(found, coreVisit{p, basePath(id)})
				continue
			}
			queue = append(queue, imp)
		}
	}
	return found
}

// basePath strips a test variant's " [p.test]" from a go list ImportPath.
func basePath(id string) string {
	p, _, _ := strings.Cut(id, " ")
	return p
}
