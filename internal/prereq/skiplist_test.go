package prereq

import (
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// pendingRawSkips are files known to call t.Skip directly, each being
// converted elsewhere. An entry whose file no longer has a raw skip fails
// the test too, so the list only shrinks.
var pendingRawSkips = map[string]bool{}

// TestNoRawSkips walks every Go file of the repository: a test that calls
// Skip, Skipf or SkipNow itself escapes PLOYZ_REQUIRE_PRIVILEGED (a CI
// host missing a prerequisite would lose the test quietly), so every skip
// goes through this package. It fails naming file:line for each raw skip
// and logs every skip this package is asked for, with its reason, for a
// reviewer.
func TestNoRawSkips(t *testing.T) {
	root := repoRoot(t)
	found, err := scanSkips(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range found.reasons {
		t.Log(r)
	}
	t.Logf("%d skip sites through prereq", len(found.reasons))
	seen := map[string]bool{}
	for _, r := range found.raw {
		file, _, _ := strings.Cut(r, ":")
		seen[file] = true
		if !pendingRawSkips[file] {
			t.Errorf("%s: a raw skip: use prereq.Missing (a missing prerequisite, fails in CI) or prereq.Skip (on purpose, with its reason)", r)
		}
	}
	for file := range pendingRawSkips {
		if !seen[file] {
			t.Errorf("%s has no raw skip any more: remove it from pendingRawSkips", file)
		}
	}
}

// TestScanSkipsFindsRawSkips: the scan finds each form of a raw skip and
// takes the ones through this package as reasons.
func TestScanSkipsFindsRawSkips(t *testing.T) {
	dir := t.TempDir()
	src := `package x

import "testing"

func TestA(t *testing.T) { t.Skip("no") }
func BenchmarkB(b *testing.B) { b.Skipf("%d", 1) }
func helper(tb testing.TB) { tb.SkipNow() }
func TestC(t *testing.T) { prereq.Skip(t, "on purpose") }
func TestD(t *testing.T) { got.Skipped = nil }
`
	if err := os.MkdirAll(filepath.Join(dir, "a", "testdata"), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{"a/x_test.go", "a/testdata/y_test.go"} {
		if err := os.WriteFile(filepath.Join(dir, p), []byte(src), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	found, err := scanSkips(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"a/x_test.go:5: t.Skip", "a/x_test.go:6: b.Skipf", "a/x_test.go:7: tb.SkipNow"}
	if !slices.Equal(found.raw, want) {
		t.Errorf("raw skips %q, want %q", found.raw, want)
	}
	if len(found.reasons) != 1 || found.reasons[0] != `a/x_test.go:8: prereq.Skip(t, "on purpose")` {
		t.Errorf("reasons %q", found.reasons)
	}
}

// skips is what scanSkips finds: raw skip calls ("file:line: t.Skip") and
// the calls into this package that may skip, with their arguments.
type skips struct{ raw, reasons []string }

// skipMethods are testing.TB's skipping methods.
var skipMethods = map[string]bool{"Skip": true, "Skipf": true, "SkipNow": true}

// prereqSkippers are this package's functions that may end a test.
var prereqSkippers = map[string]bool{"Skip": true, "Missing": true, "Root": true, "Command": true, "File": true}

// scanSkips parses every .go file under root outside testdata, vendor,
// hidden directories and this package.
func scanSkips(root string) (skips, error) {
	var out skips
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			name := d.Name()
			if rel != "." && (strings.HasPrefix(name, ".") || name == "testdata" || name == "vendor" || name == "node_modules" || rel == "internal/prereq") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(path, ".go") {
			return nil
		}
		src, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		f, err := parser.ParseFile(fset, path, src, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		out.file(fset, f, rel, src)
		return nil
	})
	return out, err
}

// file adds one parsed file's skip calls.
func (s *skips) file(fset *token.FileSet, f *ast.File, rel string, src []byte) {
	ast.Inspect(f, func(n ast.Node) bool {
		call, ok := n.(*ast.CallExpr)
		if !ok {
			return true
		}
		sel, ok := call.Fun.(*ast.SelectorExpr)
		if !ok {
			return true
		}
		recv := exprName(sel.X)
		line := fset.Position(call.Pos()).Line
		switch {
		case recv == "prereq" && prereqSkippers[sel.Sel.Name]:
			text := string(src[fset.Position(call.Pos()).Offset:fset.Position(call.End()).Offset])
			s.reasons = append(s.reasons, rel+":"+strconv.Itoa(line)+": "+strings.Join(strings.Fields(text), " "))
		case recv != "prereq" && skipMethods[sel.Sel.Name]:
			s.raw = append(s.raw, rel+":"+strconv.Itoa(line)+": "+recv+"."+sel.Sel.Name)
		}
		return true
	})
}

// exprName names a call's receiver for the report: t, b, tb, s.t, ...
func exprName(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.Ident:
		return x.Name
	case *ast.SelectorExpr:
		return exprName(x.X) + "." + x.Sel.Name
	default:
		return "(expr)"
	}
}

// repoRoot is the directory of the module's go.mod above this package.
func repoRoot(t *testing.T) string {
	t.Helper()
	dir, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			t.Fatal("no go.mod above the test's directory")
		}
		dir = parent
	}
}
