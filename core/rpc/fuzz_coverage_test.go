package rpc

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// decodingPackages are the packages whose handlers decode what a caller
// sends a Machine: ployzd's and the stream servers it delegates to.
var decodingPackages = []string{"../daemon", "../images", "../volumesend"}

// TestFuzzCoversEveryDecodedPayload reads the daemon's source for every
// rpc.Decode(rpc.CmdX, raw, &req) and checks FuzzDecodePayload decodes
// CmdX into req's type, so a new handler cannot bring an unfuzzed payload,
// nor decode one around Decode (json.Unmarshal of a request skips the
// errors that name the field).
func TestFuzzCoversEveryDecodedPayload(t *testing.T) {
	consts := commandConstants(t)
	found := 0
	for _, dir := range decodingPackages {
		for _, c := range decodeCalls(t, dir) {
			found++
			if c.command == "json.Unmarshal" {
				t.Errorf("%s: decodes a %s with json.Unmarshal: use rpc.Decode, which FuzzDecodePayload fuzzes", c.pos, c.typ)
				continue
			}
			cmd, ok := consts[c.command]
			if !ok {
				t.Errorf("%s: rpc.Decode with %s, not a command constant of package rpc", c.pos, c.command)
				continue
			}
			mk, ok := payloadTypes[cmd]
			if !ok {
				t.Errorf("%s: %s (%s) is decoded but FuzzDecodePayload does not fuzz it", c.pos, c.command, cmd)
				continue
			}
			if got := reflect.TypeOf(mk()).Elem().Name(); got != c.typ {
				t.Errorf("%s: %s decodes into %s, FuzzDecodePayload fuzzes %s", c.pos, cmd, c.typ, got)
			}
		}
	}
	// Declared commands decode through their Method, out of the scan's
	// sight (TestFuzzCoversEveryDeclaredRequest covers them).
	typed := 0
	for _, d := range Catalog() {
		if _, ok := payloadTypes[d.Name]; ok {
			typed++
		}
	}
	if found < (len(payloadTypes)-typed)/2 {
		t.Fatalf("found only %d rpc.Decode calls: the source scan is broken", found)
	}
}

// TestFuzzCoversEveryDeclaredRequest: a declared command's handler
// decodes through its Method, not a visible rpc.Decode call, so the
// scan above cannot see it; FuzzDecodePayload must fuzz its request type
// all the same (through the typed decoder too, checkTyped).
func TestFuzzCoversEveryDeclaredRequest(t *testing.T) {
	for _, d := range Catalog() {
		if d.Request == reflect.TypeFor[None]() {
			continue
		}
		mk, ok := payloadTypes[d.Name]
		if !ok {
			t.Errorf("%s is declared with request %v, which FuzzDecodePayload does not fuzz", d.Name, d.Request)
			continue
		}
		if got := reflect.TypeOf(mk()).Elem(); got != d.Request {
			t.Errorf("%s is declared with request %v, FuzzDecodePayload fuzzes %v", d.Name, d.Request, got)
		}
	}
}

// decodeCall is one rpc.Decode call: the command constant and the type
// of the variable it decodes into.
type decodeCall struct {
	pos          string
	command, typ string
}

func parseDir(t *testing.T, dir string) []*ast.File {
	t.Helper()
	names, err := filepath.Glob(filepath.Join(dir, "*.go"))
	if err != nil {
		t.Fatal(err)
	}
	var files []*ast.File
	fset := token.NewFileSet()
	for _, n := range names {
		if strings.HasSuffix(n, "_test.go") {
			continue
		}
		src, err := os.ReadFile(n)
		if err != nil {
			t.Fatal(err)
		}
		f, err := parser.ParseFile(fset, n, src, 0)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, f)
	}
	if len(files) == 0 {
		t.Fatalf("no Go files in %s", dir)
	}
	return files
}

// commandConstants maps the name of each string constant of this package
// to its value.
func commandConstants(t *testing.T) map[string]string {
	out := map[string]string{}
	for _, f := range parseDir(t, ".") {
		ast.Inspect(f, func(n ast.Node) bool {
			vs, ok := n.(*ast.ValueSpec)
			if !ok {
				return true
			}
			for i, name := range vs.Names {
				if i < len(vs.Values) {
					if lit, ok := vs.Values[i].(*ast.BasicLit); ok && lit.Kind == token.STRING {
						out[name.Name], _ = strconv.Unquote(lit.Value)
					}
				}
			}
			return true
		})
	}
	return out
}

// decodeCalls finds the rpc.Decode calls of the package in dir, each with
// the type its target variable is declared with in the same function.
func decodeCalls(t *testing.T, dir string) []decodeCall {
	var out []decodeCall
	for _, f := range parseDir(t, dir) {
		for _, d := range f.Decls {
			fn, ok := d.(*ast.FuncDecl)
			if !ok || fn.Body == nil {
				continue
			}
			vars := rpcVars(fn)
			ast.Inspect(fn.Body, func(n ast.Node) bool {
				call, ok := n.(*ast.CallExpr)
				if !ok {
					return true
				}
				if bypass := unmarshalTarget(call, vars); bypass != "" {
					out = append(out, decodeCall{pos: dir + "/" + fn.Name.Name, command: "json.Unmarshal", typ: bypass})
					return true
				}
				if !isRPC(call.Fun, "Decode") || len(call.Args) != 3 {
					return true
				}
				c := decodeCall{pos: dir + "/" + fn.Name.Name, command: "?", typ: "?"}
				if sel, ok := call.Args[0].(*ast.SelectorExpr); ok && isRPC(sel, sel.Sel.Name) {
					c.command = sel.Sel.Name
				}
				if u, ok := call.Args[2].(*ast.UnaryExpr); ok && u.Op == token.AND {
					if id, ok := u.X.(*ast.Ident); ok && vars[id.Name] != "" {
						c.typ = vars[id.Name]
					}
				}
				out = append(out, c)
				return true
			})
		}
	}
	return out
}

// unmarshalTarget is the request type json.Unmarshal(b, &req) decodes
// into when req is an rpc.*Request: a payload decoded around rpc.Decode.
func unmarshalTarget(call *ast.CallExpr, vars map[string]string) string {
	sel, ok := call.Fun.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != "Unmarshal" || len(call.Args) != 2 {
		return ""
	}
	if id, ok := sel.X.(*ast.Ident); !ok || id.Name != "json" {
		return ""
	}
	u, ok := call.Args[1].(*ast.UnaryExpr)
	if !ok || u.Op != token.AND {
		return ""
	}
	id, ok := u.X.(*ast.Ident)
	if !ok || !strings.HasSuffix(vars[id.Name], "Request") {
		return ""
	}
	return vars[id.Name]
}

// rpcVars maps each variable fn declares as `var v rpc.T` to T.
func rpcVars(fn *ast.FuncDecl) map[string]string {
	out := map[string]string{}
	ast.Inspect(fn.Body, func(n ast.Node) bool {
		vs, ok := n.(*ast.ValueSpec)
		if !ok {
			return true
		}
		if sel, ok := vs.Type.(*ast.SelectorExpr); ok && isRPC(sel, sel.Sel.Name) {
			for _, name := range vs.Names {
				out[name.Name] = sel.Sel.Name
			}
		}
		return true
	})
	return out
}

// isRPC reports whether e is rpc.<name>.
func isRPC(e ast.Expr, name string) bool {
	sel, ok := e.(*ast.SelectorExpr)
	if !ok || sel.Sel.Name != name {
		return false
	}
	id, ok := sel.X.(*ast.Ident)
	return ok && id.Name == "rpc"
}
