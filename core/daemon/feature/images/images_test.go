package images

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/docker/docker/client"
	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/internal/dockertest"
)

// testHost is a Machine named "one" with the Docker client it is given
// (nil: none) and no peers.
type testHost struct{ docker client.APIClient }

func (h testHost) Docker() client.APIClient                { return h.docker }
func (testHost) Local() (string, string)                   { return "m1", "one" }
func (testHost) Peers(context.Context) ([]rpc.Peer, error) { return nil, nil }
func (testHost) DialPeer(context.Context, rpc.Peer) (*rpc.Client, error) {
	return nil, errors.New("no peers here")
}

func errCode(err error) string {
	var e *rpc.Error
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// TestWithoutDocker: the unary routes are not advertised and the pull
// stream refuses while the Machine has no Docker client.
func TestWithoutDocker(t *testing.T) {
	f := New(testHost{}, hclog.NewNullLogger())
	for _, r := range f.Routes() {
		if r.Available() {
			t.Errorf("%s advertised without Docker", r.Command)
		}
	}
	var progress rpc.StreamRoute
	for _, r := range f.Streams() {
		if r.Command == rpc.CmdPullImageProgress {
			progress = r
		}
	}
	if err := progress.Handler(context.Background(), []byte(`{"image":"app:1"}`), nil); errCode(err) != rpc.CodeUnavailable {
		t.Fatalf("pull_image_progress without Docker: %v", err)
	}
}

func TestPullImageRefusals(t *testing.T) {
	t.Parallel()
	f := New(testHost{}, hclog.NewNullLogger())
	_, err := f.pullImage(context.Background(), rpc.PullImageRequest{Image: "Not A Ref"})
	var e *rpc.Error
	if !errors.As(err, &e) || e.Code != rpc.CodeInvalidArgument || e.Details["field"] != "image" {
		t.Fatalf("bad reference: %v", err)
	}
	// Nothing listens on port 1: the pull fails, naming the Machine and
	// image, and never echoes the credential.
	f = New(testHost{docker: dockertest.Client(t)}, hclog.NewNullLogger())
	_, err = f.pullImage(context.Background(), rpc.PullImageRequest{Image: "127.0.0.1:1/app:1", RegistryAuth: "c2VjcmV0LWNyZWQ"})
	if err == nil || !strings.Contains(err.Error(), "127.0.0.1:1/app:1") || !strings.Contains(err.Error(), "machine one") ||
		strings.Contains(err.Error(), "c2VjcmV0LWNyZWQ") {
		t.Fatalf("failed pull: %v", err)
	}
}

// TestListImages: list_images answers this Machine's platform and a list
// (never null), with each image's layers when asked.
func TestListImages(t *testing.T) {
	f := New(testHost{docker: dockertest.Client(t)}, hclog.NewNullLogger())
	l, err := f.listImages(context.Background(), rpc.ListImagesRequest{Layers: true})
	if err != nil || l.Images == nil || l.Platform == "" {
		t.Fatalf("list_images: %+v %v", l, err)
	}
}

// TestPullStatusProgress feeds pullStatus the lines Docker's pull
// endpoint writes and checks the progress each one reports: bytes and
// layers over the layers named so far, a held layer done at once.
func TestPullStatusProgress(t *testing.T) {
	stream := `{"status":"Pulling from library/app","id":"1"}
{"status":"Already exists","progressDetail":{},"id":"aaa"}
{"status":"Pulling fs layer","progressDetail":{},"id":"bbb"}
{"status":"Downloading","progressDetail":{"current":100,"total":1000},"id":"bbb"}
{"status":"Downloading","progressDetail":{"current":600,"total":1000},"id":"bbb"}
{"status":"Download complete","progressDetail":{},"id":"bbb"}
{"status":"Extracting","progressDetail":{"current":1000,"total":1000},"id":"bbb"}
{"status":"Pull complete","progressDetail":{},"id":"bbb"}
{"status":"Digest: sha256:abc"}
{"status":"Status: Downloaded newer image for app:1"}
`
	var got []rpc.PullProgress
	last, err := pullStatus(strings.NewReader(stream), func(p rpc.PullProgress) { got = append(got, p) })
	if err != nil || last != "Status: Downloaded newer image for app:1" {
		t.Fatalf("pullStatus = %q, %v", last, err)
	}
	want := []rpc.PullProgress{
		{Layers: 1, LayersDone: 1},
		{Layers: 2, LayersDone: 1},
		{Layers: 2, LayersDone: 1, Bytes: 100, Total: 1000},
		{Layers: 2, LayersDone: 1, Bytes: 600, Total: 1000},
		{Layers: 2, LayersDone: 1, Bytes: 1000, Total: 1000},
		{Layers: 2, LayersDone: 1, Bytes: 1000, Total: 1000},
		{Layers: 2, LayersDone: 2, Bytes: 1000, Total: 1000},
	}
	if len(got) != len(want) {
		t.Fatalf("progress %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("progress[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
	_, err = pullStatus(strings.NewReader(`{"status":"Pulling fs layer","id":"x"}
{"errorDetail":{"message":"unauthorized: login"},"error":"unauthorized: login"}
`), nil)
	if err == nil || err.Error() != "unauthorized: login" {
		t.Fatalf("failed pull: %v", err)
	}
}
