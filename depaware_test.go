package ployz_test

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
)

// The packages each shipped binary links are committed beside its main
// package, in depaware.txt (docs/contributing.md, "Dependency lists"):
// a change to what a binary links shows in review as a change to that
// file, like Tailscale's depaware. TestDepaware fails with a diff when a
// list is stale; `make depaware-update` rewrites them.
//
// A list is for linux/amd64 (the Machines' platform; the CLI's darwin
// build differs only in the OS packages it picks). It holds the
// module's own and third-party packages, then the standard library's
// apart, without the standard library's internal/ and vendor/ packages:
// those change with every Go release and are no choice of ours.

// depawareBinaries are the main packages Ployz ships (make build,
// make release): ployzd, the CLI and each plugin.
func depawareBinaries(t *testing.T) []string {
	bins := []string{"./cmd/ployz", "./cmd/ployzd"}
	entries, err := os.ReadDir("plugins")
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if e.IsDir() && e.Name() != "internal" {
			bins = append(bins, "./plugins/"+e.Name())
		}
	}
	return bins
}

// depawareUpdate rewrites the lists instead of comparing (make depaware-update).
const depawareUpdate = "PLOYZ_DEPAWARE_UPDATE"

func TestDepaware(t *testing.T) {
	bins := depawareBinaries(t)
	lists, err := depawareLists(bins)
	if err != nil {
		t.Fatal(err)
	}
	for _, bin := range bins {
		want := lists[strings.TrimPrefix(bin, "./")]
		file := filepath.Join(bin, "depaware.txt")
		if os.Getenv(depawareUpdate) == "1" {
			if err := os.WriteFile(file, want, 0o644); err != nil {
				t.Fatal(err)
			}
			continue
		}
		got, err := os.ReadFile(file)
		if err != nil {
			t.Errorf("%s: %v (make depaware-update writes it)", file, err)
			continue
		}
		if d := lineDiff(got, want); d != "" {
			t.Errorf("%s is not what %s links now (- committed, + linked); if the change is meant, run make depaware-update and commit the file:\n%s", file, bin, d)
		}
	}
}

// depawareLists runs one `go list -deps` over every binary and returns
// each binary's list (keyed by its directory), in depaware.txt's format.
func depawareLists(bins []string) (map[string][]byte, error) {
	// One line per package: "std" or "mod", its path, and for a main
	// package its dependencies (the roots are the only main packages).
	const format = `{{if .Standard}}std{{else}}mod{{end}} {{.ImportPath}}{{if eq .Name "main"}} {{join .Deps " "}}{{end}}`
	cmd := exec.Command(goBinary(), append([]string{"list", "-deps", "-f", format}, bins...)...)
	cmd.Env = append(os.Environ(), "GOOS=linux", "GOARCH=amd64", "CGO_ENABLED=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps: %v\n%s", err, stderr.String())
	}
	std := map[string]bool{}
	deps := map[string][]string{} // main package path: its dependencies
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 {
			continue
		}
		std[f[1]] = f[0] == "std"
		if len(f) > 2 {
			deps[f[1]] = f[2:]
		}
	}
	lists := map[string][]byte{}
	const module = "github.com/ployz/ployz/"
	for _, bin := range bins {
		dir := strings.TrimPrefix(bin, "./")
		d, ok := deps[module+dir]
		if !ok {
			return nil, fmt.Errorf("go list printed no main package %s", module+dir)
		}
		lists[dir] = depawareFormat(module+dir, d, std)
	}
	return lists, nil
}

// depawareFormat writes one binary's list: a header, the module's and
// third-party packages, then the standard library's.
func depawareFormat(main string, deps []string, std map[string]bool) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "# Packages %s links (linux/amd64), from go list -deps.\n", main)
	b.WriteString("# Checked by TestDepaware (depaware_test.go); rewrite with make depaware-update.\n")
	var mods, stds []string
	for _, p := range deps {
		switch {
		case !std[p]:
			mods = append(mods, p)
		case p == "internal" || strings.HasPrefix(p, "internal/") || strings.Contains(p, "/internal/") ||
			strings.HasPrefix(p, "vendor/"):
			// the standard library's own internals: Go's choice, not ours
		default:
			stds = append(stds, p)
		}
	}
	slices.Sort(mods)
	slices.Sort(stds)
	b.WriteString("\n# modules\n")
	for _, p := range mods {
		b.WriteString(p + "\n")
	}
	b.WriteString("\n# standard library\n")
	for _, p := range stds {
		b.WriteString(p + "\n")
	}
	return b.Bytes()
}

// lineDiff lists the lines only in a (-) and only in b (+), in order; ""
// when the two hold the same lines. The lists are sorted sets, so this is
// the whole diff.
func lineDiff(a, b []byte) string {
	as, bs := strings.Split(string(a), "\n"), strings.Split(string(b), "\n")
	ina, inb := map[string]bool{}, map[string]bool{}
	for _, l := range as {
		ina[l] = true
	}
	for _, l := range bs {
		inb[l] = true
	}
	var d strings.Builder
	for _, l := range as {
		if !inb[l] {
			d.WriteString("- " + l + "\n")
		}
	}
	for _, l := range bs {
		if !ina[l] {
			d.WriteString("+ " + l + "\n")
		}
	}
	if d.Len() == 0 && !bytes.Equal(a, b) {
		return "(the same packages in another order or form)\n"
	}
	return d.String()
}

// goBinary is the go command running the tests.
func goBinary() string {
	//lint:ignore SA1019 a test binary runs where it was built, so its GOROOT is the go running the test
	if p := filepath.Join(runtime.GOROOT(), "bin", "go"); fileExists(p) {
		return p
	}
	return "go"
}

func fileExists(p string) bool {
	_, err := os.Stat(p)
	return err == nil
}
