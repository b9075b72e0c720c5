package pluginhost_test

import (
	"flag"
	"fmt"
	"os"
	"testing"

	"github.com/ployz/ployz/sdk/plugintest"
)

// Binaries built once for the whole package: building is the slow part.
var bins struct {
	alpha, omega, lived, bad string
}

const (
	testPluginPkg = "github.com/ployz/ployz/core/pluginhost/testdata/testplugin"
	badPkg        = "github.com/ployz/ployz/core/pluginhost/testdata/badhandshake"
	testCap       = "ployz-test.dns.status.v1"
)

func TestMain(m *testing.M) {
	flag.Parse()
	// A fuzz worker runs only the fuzz target, which needs no plugin
	// binaries: building them in every worker kept `make fuzz` gathering
	// its baseline for the whole FUZZTIME, so FuzzManifest never fuzzed.
	if f := flag.Lookup("test.fuzzworker"); f != nil && f.Value.String() == "true" {
		os.Exit(m.Run())
	}
	dir, err := os.MkdirTemp("", "pluginhost-bins-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		defer os.RemoveAll(dir)
		for _, b := range []struct {
			dst  *string
			pkg  string
			name string
			apis string
		}{
			{&bins.alpha, testPluginPkg, "alpha", "1,2,3"},
			{&bins.omega, testPluginPkg, "omega", "5,6"},
			{&bins.lived, testPluginPkg, "lived", "1"},
			{&bins.bad, badPkg, "", ""},
		} {
			var flags []string
			if b.name != "" {
				flags = []string{"-X main.name=" + b.name, "-X main.apiVersions=" + b.apis}
			}
			p, err := plugintest.BuildTo(dir, b.pkg, flags...)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return 1
			}
			*b.dst = p
		}
		return m.Run()
	}()
	os.Exit(code)
}
