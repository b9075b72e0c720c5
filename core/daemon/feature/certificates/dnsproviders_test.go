package certificates

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/ployz/ployz/core/daemon/feature/featuretest"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
)

// set_dns_provider refuses bad input naming the field and writes
// nothing; a good provider's row has its TSIG secret sealed with the
// Cluster key (opening with the ingress plugin's purpose and field),
// list and the answers name the secret but never show it, and
// remove_dns_provider deletes it.
func TestDNSProviderSetListRemove(t *testing.T) {
	f, st, dir := newTest(t)
	const secret = "c2VjcmV0LXRzaWcta2V5LWZvci10aGUtdGVzdHM="
	good := rpc.SetDNSProviderRequest{Name: "lab", Provider: "rfc2136", Zone: "Example.TEST",
		Settings: map[string]string{"server": "ns1.example.test", "tsig_key": "ployz"},
		Secrets:  map[string]string{"tsig_secret": secret}}
	with := func(f func(*rpc.SetDNSProviderRequest)) rpc.SetDNSProviderRequest {
		r := good
		r.Settings, r.Secrets = map[string]string{}, map[string]string{}
		for k, v := range good.Settings {
			r.Settings[k] = v
		}
		for k, v := range good.Secrets {
			r.Secrets[k] = v
		}
		f(&r)
		return r
	}
	for _, bad := range []struct {
		req   rpc.SetDNSProviderRequest
		field string
	}{
		{with(func(r *rpc.SetDNSProviderRequest) { r.Name = "Bad Name" }), "name"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Provider = "route53" }), "provider"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Zone = "exa mple.test" }), "zone"},
		{with(func(r *rpc.SetDNSProviderRequest) { delete(r.Settings, "server") }), "server"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Settings["server"] = "ns1:99999" }), "server"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Settings["tsig_algorithm"] = "md5" }), "tsig_algorithm"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Settings["colour"] = "blue" }), "colour"},
		{with(func(r *rpc.SetDNSProviderRequest) { r.Secrets["tsig_secret"] = "not base64!" }), "tsig_secret"},
		{with(func(r *rpc.SetDNSProviderRequest) { delete(r.Secrets, "tsig_secret") }), "tsig_secret"},
	} {
		_, err := featuretest.Call(t, featuretest.Typed(f.setDNSProvider), bad.req)
		if err == nil || !strings.Contains(err.Error(), bad.field) {
			t.Errorf("refusal %v does not name %s", err, bad.field)
		}
		if err != nil && strings.Contains(err.Error(), secret) {
			t.Errorf("refusal %v shows the secret", err)
		}
	}
	if rows, _ := st.Certificates().List(t.Context()); len(rows) != 0 {
		t.Fatalf("a refusal wrote %d rows", len(rows))
	}

	out, err := featuretest.Call(t, featuretest.Typed(f.setDNSProvider), good)
	if err != nil {
		t.Fatal(err)
	}
	v := out.(rpc.DNSProviderView)
	if v.Zone != "example.test." || v.Settings["server"] != "ns1.example.test:53" || v.Settings["tsig_key"] != "ployz." ||
		v.Settings["tsig_algorithm"] != "hmac-sha256" || len(v.Secrets) != 1 || v.Secrets[0] != "tsig_secret" {
		t.Errorf("view %+v: want the zone, server and key normalised, the default algorithm, the secret named", v)
	}
	row, ok, err := st.Certificates().Get(t.Context(), "dns-provider:lab")
	if err != nil || !ok {
		t.Fatalf("row: %v %v", ok, err)
	}
	raw, _ := json.Marshal(row.Body)
	if strings.Contains(string(raw), secret) || !strings.HasPrefix(row.Body.DNSProvider.Secrets, store.SealedPrefix) ||
		row.Body.Source != ingress.CertSourceDNSProvider || row.Body.CertPEM != "" {
		t.Fatalf("row %s: want the secret sealed and no certificate", raw)
	}
	cs, _ := store.LoadClusterSecret(dir)
	sealer, _ := store.NewSealer(cs, ingress.DNSProviderSecretsPurpose, "certificates", ingress.DNSProviderSecretsField)
	opened, err := sealer.Open(row.Key, row.Body.DNSProvider.Secrets)
	if err != nil || string(opened) != `{"tsig_secret":"`+secret+`"}` {
		t.Fatalf("open secrets: %q %v", opened, err)
	}
	list, err := featuretest.Call(t, featuretest.Typed(f.listDNSProviders), rpc.None{})
	if err != nil {
		t.Fatal(err)
	}
	ps := list.(rpc.DNSProviderList).Providers
	if len(ps) != 1 || ps[0].Name != "lab" || strings.Contains(string(mustJSON(t, ps)), secret) {
		t.Fatalf("list %s", mustJSON(t, ps))
	}
	if certs, _ := featuretest.Call(t, featuretest.Typed(f.listCertificates), rpc.None{}); len(certs.(rpc.CertificateList).Certificates) != 0 {
		t.Errorf("cert ls shows the provider row: %+v", certs)
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.removeDNSProvider), rpc.RemoveDNSProviderRequest{Name: "other"}); err == nil {
		t.Error("removing an unknown provider succeeded")
	}
	if _, err := featuretest.Call(t, featuretest.Typed(f.removeDNSProvider), rpc.RemoveDNSProviderRequest{Name: "lab"}); err != nil {
		t.Fatal(err)
	}
	if rows, _ := st.Certificates().List(t.Context()); len(rows) != 0 {
		t.Fatalf("%d rows left after rm", len(rows))
	}
}
