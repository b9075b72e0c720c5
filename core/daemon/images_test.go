package daemon

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/rpc"
)

func TestPullImageRefusals(t *testing.T) {
	t.Parallel()
	to := newTestOps(t)
	_, err := call[rpc.PullImageResult](t, to.pullImage, rpc.PullImageRequest{Image: "Not A Ref"})
	if rpcCode(err) != rpc.CodeInvalidArgument || rpcDetail(err, "field") != "image" {
		t.Fatalf("bad reference: %v", err)
	}
	// Nothing listens on port 1: the pull fails, naming the Machine and
	// image, and never echoes the credential.
	_, err = call[rpc.PullImageResult](t, to.pullImage, rpc.PullImageRequest{Image: "127.0.0.1:1/app:1", RegistryAuth: "c2VjcmV0LWNyZWQ"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/app:1") || !strings.Contains(err.Error(), to.facts.Name) ||
		strings.Contains(err.Error(), "c2VjcmV0LWNyZWQ") {
		t.Fatalf("failed pull: %v", err)
	}
}
