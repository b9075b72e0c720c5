package dns

import (
	"bytes"
	"context"
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/serving"
	"github.com/ployz/ployz/sdk/store"
)

// forgedRows are ready rows no Machine can vouch for, each a Service of
// its own, beside one legitimate Container.
func forgedRows() []store.Row[store.ContainerBody] {
	return []store.Row[store.ContainerBody]{
		row("ok", "m1", "api", "demo", "svc-api", "10.210.1.2", true),
		row("meta", "m1", "meta", "demo", "svc-meta", "169.254.169.254", true),
		row("lo", "m1", "lo", "demo", "svc-lo", "127.0.0.1", true),
		row("other", "m1", "other", "demo", "svc-other", "10.210.2.7", true), // m2's subnet
		row("joining", "m4", "joining", "demo", "svc-joining", "10.210.4.2", true),
		row("ghost", "m9", "ghost", "demo", "svc-ghost", "10.210.9.2", true), // no machines row
	}
}

// forgedMachines is the machines table of forgedRows: m1 and m2
// participate; m4 is only joining, so it vouches for nothing yet.
func forgedMachines() serving.Machines {
	return serving.MachinesOf([]store.Row[store.MachineBody]{
		{Key: "m1", Body: store.MachineBody{Phase: serving.Participating, Subnet: "10.210.1.0/24"}},
		{Key: "m2", Body: store.MachineBody{Phase: serving.Participating, Subnet: "10.210.2.0/24"}},
		{Key: "m4", Body: store.MachineBody{Phase: "joining", Subnet: "10.210.4.0/24"}},
	})
}

// TestDoesNotAnswerUnvouchedAddresses: a ready row whose address is cloud
// metadata, loopback, another Machine's subnet, or whose owner does not
// participate is answered by no name and no PTR, and is listed as
// refused; the legitimate row still answers.
func TestDoesNotAnswerUnvouchedAddresses(t *testing.T) {
	up, _ := upstream(t)
	cfg := testCfg(t, up)
	cfg.NetworkPrefix = mustPrefix("10.210.0.0/16")
	h := NewHandler(cfg, nil)
	tb := NewTable(forgedMachines(), forgedRows())
	h.SetTable(tb)
	addr := serve(t, h)

	if rc, got := both(t, addr, "api.demo.internal"); rc != "NOERROR" || !slices.Equal(got, []string{"10.210.1.2"}) {
		t.Fatalf("legitimate row: %s %v", rc, got)
	}
	for _, svc := range []string{"meta", "lo", "other", "joining", "ghost"} {
		if rc, got := both(t, addr, svc+".demo.internal"); rc != "NXDOMAIN" || len(got) != 0 {
			t.Errorf("%s answered: %s %v", svc, rc, got)
		}
		if got, ok := tb.Lookup(ParseName("svc-"+svc+".id.lookup.internal"), "m1", netip.Prefix{}, 0); ok {
			t.Errorf("%s answered by id: %v", svc, got)
		}
		if n := tb.Sets()["demo/"+svc].Refused; n != 1 {
			t.Errorf("%s: serving set counts %d refused, want 1", svc, n)
		}
	}
	for _, ip := range []string{"169.254.169.254", "127.0.0.1", "10.210.2.7"} {
		if ptr, _, ok := tb.Host(netip.MustParseAddr(ip)); ok {
			t.Errorf("PTR of %s answers %s", ip, ptr)
		}
	}
	reasons := map[string]string{}
	for _, r := range tb.Refused() {
		reasons[r.Key] = r.Reason
	}
	want := map[string]string{"meta": "link-local", "lo": "outside", "other": "outside", "joining": "no participating", "ghost": "no participating"}
	if len(reasons) != len(want) {
		t.Fatalf("refused %v, want %v", reasons, want)
	}
	for k, w := range want {
		if !strings.Contains(reasons[k], w) {
			t.Errorf("refusal of %s: %q, want it to say %q", k, reasons[k], w)
		}
	}
}

// TestRefusalsAreLoggedOncePerRow: every load sees the same forged rows;
// each is logged once, again only when its reason changes.
func TestRefusalsAreLoggedOncePerRow(t *testing.T) {
	var buf bytes.Buffer
	log := hclog.New(&hclog.LoggerOptions{Output: &buf, Level: hclog.Warn})
	var l refusalLog
	for range 3 {
		l.report(log, NewTable(forgedMachines(), forgedRows()).Refused())
	}
	if n := strings.Count(buf.String(), "cannot vouch for"); n != 5 {
		t.Fatalf("%d warnings over three loads, want one per refused row (5):\n%s", n, buf.String())
	}
	if !strings.Contains(buf.String(), "ip=169.254.169.254") || !strings.Contains(buf.String(), "container=meta") {
		t.Fatalf("warning lacks the row or its address:\n%s", buf.String())
	}
	// m4 finishes joining, so its row serves; "ghost" stays refused for
	// the same reason: nothing is logged.
	ms := forgedMachines()
	ms.Subnets["m4"] = netip.MustParsePrefix("10.210.4.0/24")
	buf.Reset()
	l.report(log, NewTable(ms, forgedRows()).Refused())
	if buf.Len() != 0 {
		t.Fatalf("logged again with no new refusal:\n%s", buf.String())
	}
	// A row refused for a new reason is logged again.
	rows := forgedRows()
	rows[5].Owner = "m2"
	l.report(log, NewTable(ms, rows).Refused())
	if n := strings.Count(buf.String(), "cannot vouch for"); n != 1 || !strings.Contains(buf.String(), "container=ghost") {
		t.Fatalf("a changed reason: %d warnings\n%s", n, buf.String())
	}
}

// TestJoiningMachineAnswersOnceParticipating: the same row is answered
// once its Machine participates (so the rule is the phase, not the row).
func TestJoiningMachineAnswersOnceParticipating(t *testing.T) {
	ms := forgedMachines()
	if _, ok := NewTable(ms, forgedRows()).Lookup(ParseName("joining.demo.internal"), "m1", netip.Prefix{}, 0); ok {
		t.Fatal("a joining Machine's Container answered")
	}
	ms.Subnets["m4"] = netip.MustParsePrefix("10.210.4.0/24")
	got, ok := NewTable(ms, forgedRows()).Lookup(ParseName("joining.demo.internal"), "m1", netip.Prefix{}, 0)
	if !ok || !slices.Equal(ips(got), []string{"10.210.4.2"}) {
		t.Fatalf("participating: %v %v", ips(got), ok)
	}
}

// forgedSource serves the forged tables to Load.
type forgedSource struct{}

func (forgedSource) Read(context.Context) (serving.Input, error) {
	return serving.Input{Machines: forgedMachines(), Containers: forgedRows()}, nil
}

func (forgedSource) Watch(ctx context.Context, log hclog.Logger) *store.Watch {
	return store.NewWatch(ctx, func(func(*store.Client) error) error { return errors.New("no store here") }, nil, log)
}

// TestLoadCountsRefusedRows: each load records how many rows it refused,
// which the plugin's Info hands to `machine inspect`.
func TestLoadCountsRefusedRows(t *testing.T) {
	serving.SetRefused(0)
	up, _ := upstream(t)
	h := NewHandler(testCfg(t, up), nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	loaded := make(chan struct{})
	go Load(ctx, h, forgedSource{}, time.Hour, hclog.NewNullLogger(), func() { close(loaded) })
	<-loaded
	if n := serving.RefusedRows(); n != 5 {
		t.Fatalf("refused rows %d, want the 5 forged ones", n)
	}
}
