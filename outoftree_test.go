package ployz_test

import (
	"os/exec"
	"strings"
	"testing"
)

// outOfTree is a plugin module of its own (sdk/example/outoftree/go.mod,
// with a replace directive to this repository), as a third party writes
// one: what it needs from Ployz must be in sdk/.
const outOfTree = "sdk/example/outoftree"

// TestOutOfTreePlugin vets, builds and tests the out-of-tree plugin, and
// checks that it imports nothing of Ployz's but sdk/ packages.
func TestOutOfTreePlugin(t *testing.T) {
	run := func(args ...string) string {
		t.Helper()
		cmd := exec.Command(goBinary(), args...)
		cmd.Dir = outOfTree
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("cd %s && go %s: %v\n%s(after a change to go.mod here: cd %s && go mod tidy)", outOfTree, strings.Join(args, " "), err, out, outOfTree)
		}
		return string(out)
	}
	imports := run("list", "-f", `{{join .Imports "\n"}}{{"\n"}}{{join .TestImports "\n"}}`, "./...")
	for _, imp := range strings.Fields(imports) {
		if strings.HasPrefix(imp, "github.com/ployz/ployz/") && !strings.HasPrefix(imp, "github.com/ployz/ployz/sdk/") && imp != "github.com/ployz/ployz/sdk" {
			t.Errorf("%s imports %s: a plugin outside the repository reaches Ployz through sdk/ only", outOfTree, imp)
		}
	}
	run("vet", "./...")
	run("test", "-count=1", "./...")
}
