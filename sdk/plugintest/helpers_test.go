package plugintest_test

import (
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/ployz/ployz/sdk/plugintest"
)

// exampleBin is the example plugin, built once for all tests.
var exampleBin string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "plugintest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		if exampleBin, err = plugintest.BuildTo(dir, examplePkg); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		return m.Run()
	}()
	os.Exit(code)
}

func runOutput(bin string, args ...string) (string, error) {
	b, err := exec.Command(bin, args...).CombinedOutput()
	return string(b), err
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
