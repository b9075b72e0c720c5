package main

import (
	"context"
	"slices"
	"testing"

	"github.com/ployz/ployz/sdk/plugintest"
	dnsv1 "github.com/ployz/ployz/sdk/proto/ployz/plugin/dns/v1"
)

// TestHello builds the plugin and runs it the way ployzd does: a managed
// child, Info, Configure, then its DNS service.
func TestHello(t *testing.T) {
	p := plugintest.Start(t, plugintest.Build(t, "example.com/ployz-hello"))
	if p.Info.GetName() != "hello" || !slices.Contains(p.Info.GetCapabilities(), "hello.dns.count.v1") {
		t.Fatalf("Info: %v", p.Info)
	}
	p.Configure(t, nil)
	dns := dnsv1.NewDNSClient(p.Conn)
	ctx := context.Background()
	if st, err := dns.Status(ctx, &dnsv1.StatusRequest{}); err != nil || st.GetServing() {
		t.Fatalf("Status before any spec: %v, %v; want not serving", st, err)
	}
	if _, err := dns.ApplySpec(ctx, &dnsv1.ApplySpecRequest{Spec: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if st, err := dns.Status(ctx, &dnsv1.StatusRequest{}); err != nil || !st.GetServing() {
		t.Fatalf("Status after a spec: %v, %v; want serving", st, err)
	}
}
