package certificates

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// setDNSProvider checks the provider (naming the field on a refusal),
// seals its secrets and writes its row; nothing is written on a refusal.
func (f *Feature) setDNSProvider(ctx context.Context, req rpc.SetDNSProviderRequest) (rpc.DNSProviderView, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	p, err := ingress.CheckDNSProvider(ingress.DNSProvider{Name: req.Name, Provider: req.Provider, Zone: req.Zone,
		Settings: req.Settings, Secrets: req.Secrets})
	if err != nil {
		var fe *ingress.DNSProviderFieldError
		if errors.As(err, &fe) {
			return rpc.DNSProviderView{}, rpc.InvalidField(fe.Field, "%s", fe.Why)
		}
		return rpc.DNSProviderView{}, rpc.InvalidField("provider", "%v", err)
	}
	r, err := f.dnsProviderRow(p, time.Now())
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	if err := put(ctx, st, r, "DNS provider"); err != nil {
		return rpc.DNSProviderView{}, err
	}
	return dnsProviderView(r), nil
}

// dnsProviderRow is p's certificates row, its secrets sealed.
func (f *Feature) dnsProviderRow(p ingress.DNSProvider, now time.Time) (row, error) {
	r := row{Key: ingress.DNSProviderRow(p.Name), Owner: f.host.MachineID(),
		Body: sdkstore.CertificateBody{Source: ingress.CertSourceDNSProvider, AddedAt: now.Unix(),
			DNSProvider: &sdkstore.DNSProviderBody{Provider: p.Provider, Zone: p.Zone, Settings: p.Settings}}}
	if len(p.Secrets) == 0 {
		return r, nil
	}
	raw, _ := json.Marshal(p.Secrets) // a map of strings always marshals
	var err error
	r.Body.DNSProvider.Secrets, err = f.seal(dnsSecrets, r.Key, raw)
	return r, err
}

// listDNSProviders answers every provider row, secrets named only.
func (f *Feature) listDNSProviders(ctx context.Context, _ rpc.None) (rpc.DNSProviderList, error) {
	_, rows, err := f.rows(ctx, nil)
	if err != nil {
		return rpc.DNSProviderList{}, err
	}
	out := rpc.DNSProviderList{Providers: views(rows, isDNSProviderRow, dnsProviderView)}
	slices.SortFunc(out.Providers, func(a, b rpc.DNSProviderView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// removeDNSProvider deletes the provider name; the names of its zone go
// back to HTTP-01 (wildcards to no certificate).
func (f *Feature) removeDNSProvider(ctx context.Context, req rpc.RemoveDNSProviderRequest) (rpc.DNSProviderView, error) {
	st, rows, err := f.rows(ctx, req)
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	key := ingress.DNSProviderRow(strings.ToLower(strings.TrimPrefix(req.Name, ingress.DNSProviderPrefix)))
	// Keys are unique: at most one row matches.
	removed, err := remove(ctx, st, rows, func(r row) bool { return r.Key == key && isDNSProviderRow(r) },
		func(row) string { return "DNS provider " + req.Name })
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	if len(removed) == 0 {
		return rpc.DNSProviderView{}, rpc.Errorf(rpc.CodeNotFound, "no DNS provider named %q (ployz cert dns-provider ls)", req.Name)
	}
	return dnsProviderView(removed[0]), nil
}

func isDNSProviderRow(r row) bool {
	return r.Body.Source == ingress.CertSourceDNSProvider || strings.HasPrefix(r.Key, ingress.DNSProviderPrefix)
}

// dnsProviderView is a provider row as operators see it: the secrets'
// names from its kind, never their values (sealed, not opened here).
func dnsProviderView(r row) rpc.DNSProviderView {
	v := rpc.DNSProviderView{Name: strings.TrimPrefix(r.Key, ingress.DNSProviderPrefix), AddedAt: r.Body.AddedAt}
	b := r.Body.DNSProvider
	if b == nil {
		v.Error = `field "dns_provider" is missing`
		return v
	}
	v.Provider, v.Zone = b.Provider, b.Zone
	if len(b.Settings) > 0 {
		v.Settings = maps.Clone(b.Settings)
	}
	if b.Secrets != "" {
		v.Secrets = slices.Clone(ingress.DNSProviderKinds[b.Provider].Secrets)
	}
	return v
}
