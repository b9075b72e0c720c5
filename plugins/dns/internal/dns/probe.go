package dns

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	miekg "github.com/miekg/dns"
	dnsspec "github.com/ployz/ployz/sdk/dns"
	"github.com/ployz/ployz/sdk/serving"

	"github.com/ployz/ployz/sdk/store"
)

// Probe checks this binary can serve: the spec at specPath (when not
// empty) validates, and a loopback server answers a query for a Service
// from a synthetic table the way a Container would see it.
func Probe(ctx context.Context, specPath string) error {
	if specPath != "" {
		if _, _, err := dnsspec.LoadSpec(specPath); err != nil {
			return err
		}
	}
	cfg, err := dnsspec.ParseSpec([]byte(`{"machine":"probe","listen":"127.0.0.1:53","subnet":"127.0.0.0/8","store_api":"127.0.0.1:1"}`))
	if err != nil {
		return err
	}
	h := NewHandler(cfg, nil)
	probe := serving.Machines{Subnets: map[string]netip.Prefix{"probe": netip.MustParsePrefix("10.0.0.0/24")}}
	h.SetTable(NewTable(probe, []store.Row[store.ContainerBody]{{Key: "c", Owner: "probe",
		Body: store.ContainerBody{Service: "api", Namespace: "probe", IP: "10.0.0.7", Ready: true}}}))
	pc, err := net.ListenPacket("udp4", "127.0.0.1:0")
	if err != nil {
		return fmt.Errorf("probe: listen: %w", err)
	}
	srv := &miekg.Server{PacketConn: pc, Handler: h}
	go srv.ActivateAndServe() // ends with Shutdown
	defer srv.Shutdown()
	m := new(miekg.Msg)
	m.SetQuestion("api.probe.internal.", miekg.TypeA)
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(5 * time.Second)
	}
	var last error
	for time.Now().Before(deadline) {
		r, _, err := (&miekg.Client{Timeout: 500 * time.Millisecond}).Exchange(m, pc.LocalAddr().String())
		if err == nil && len(r.Answer) == 1 {
			if a, ok := r.Answer[0].(*miekg.A); ok && a.A.String() == "10.0.0.7" {
				return nil
			}
		}
		last = fmt.Errorf("probe: unexpected answer %v (error %v)", r, err)
	}
	return last
}
