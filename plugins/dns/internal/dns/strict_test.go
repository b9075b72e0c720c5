package dns

import (
	"os"
	"testing"

	"github.com/ployz/ployz/sdk/store"
)

// TestMain runs this package's tests with every store subscription
// Strict, and fails the run when one dropped a duplicate or out-of-order
// change: the reader follows the store the way it does on a Machine, so
// its tests are where a server repeating changes would show.
func TestMain(m *testing.M) { os.Exit(store.RunStrict(m)) }
