// Command testplugin is a plugin built by pluginhost's tests. Its name and
// plugin-API versions are set at link time, so one source yields plugins
// that negotiate differently:
//
//	go build -ldflags "-X main.name=alpha -X main.apiVersions=1,2,3"
//
// It serves the DNS kind's Status call under capability
// "ployz-test.dns.status.v1", answering with its pid in listen_addrs, and
// reports one more dropped "serving" store event in each Info, so a test
// sees the host keep that count current.
//
// When the file TESTPLUGIN_FAIL_IF names exists, it exits at once instead
// of serving (`info` still answers), so a test sees a start fail; when
// that file says "hang", it sleeps a minute first, a start that never
// comes up.
package main

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"google.golang.org/grpc"

	"github.com/ployz/ployz/sdk"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

var (
	name        = "testplugin"
	apiVersions = "1"
)

// Capability is what this plugin serves.
const Capability = "ployz-test.dns.status.v1"

type server struct{ dnsv1.UnimplementedDNSServer }

var infos atomic.Int64

func (server) Status(context.Context, *dnsv1.StatusRequest) (*dnsv1.StatusResponse, error) {
	return &dnsv1.StatusResponse{Serving: true, ListenAddrs: []string{strconv.Itoa(os.Getpid())}}, nil
}

func main() {
	if f := os.Getenv("TESTPLUGIN_FAIL_IF"); f != "" && (len(os.Args) < 2 || os.Args[1] != "info") {
		if b, err := os.ReadFile(f); err == nil {
			if strings.TrimSpace(string(b)) == "hang" {
				time.Sleep(time.Minute)
			}
			os.Stderr.WriteString("testplugin: " + f + " exists: failing to start\n")
			os.Exit(3)
		}
	}
	var versions []uint32
	for _, f := range strings.Split(apiVersions, ",") {
		v, err := strconv.ParseUint(f, 10, 32)
		if err != nil {
			panic("bad -X main.apiVersions: " + apiVersions)
		}
		versions = append(versions, uint32(v))
	}
	sdk.Main(&sdk.Plugin{
		Name:         name,
		Kind:         sdk.KindDNS,
		Version:      "0.0.1-test",
		Description:  "pluginhost test plugin",
		APIVersions:  versions,
		Capabilities: []string{Capability},
		Register:     func(s *grpc.Server) { dnsv1.RegisterDNSServer(s, server{}) },
		StoreEventsDropped: func() map[string]int64 {
			return map[string]int64{"serving": infos.Add(1)}
		},
		RefusedContainerRows: func() int64 { return 3 },
		// A config saying "reject" is refused, so tests see Configure arrive.
		Configure: func(_ context.Context, _ uint32, config []byte) error {
			if strings.Contains(string(config), "reject") {
				return errors.New("config asks to be rejected")
			}
			return nil
		},
	})
}
