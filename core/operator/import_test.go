package operator

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

// An import refuses a name the store holds unless told to replace it,
// and selects the context only when asked.
func TestStoreImport(t *testing.T) {
	st, err := Open(filepath.Join(t.TempDir(), "operator.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	hk := rpc.HostKeys{Path: filepath.Join(t.TempDir(), "known_hosts")}
	e := Export{Version: ExportVersion, Name: "prod", Connections: []Connection{{URL: "unix:///run/a.sock"}}}
	if err := st.Import(e, hk, false, false); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Current(); err == nil {
		t.Fatal("an import without use selected the context")
	}
	e.Connections = []Connection{{URL: "unix:///run/b.sock"}}
	if err := st.Import(e, hk, false, true); err == nil || !strings.Contains(err.Error(), "--replace") {
		t.Fatalf("import over prod = %v, want refused naming --replace", err)
	}
	if err := st.Import(e, hk, true, true); err != nil {
		t.Fatal(err)
	}
	cur, err := st.Current()
	if err != nil || cur.Name != "prod" || cur.Connections[0].URL != "unix:///run/b.sock" {
		t.Fatalf("current = %+v, %v; want the replaced prod", cur, err)
	}
}
