package daemon

import (
	"context"
	"encoding/json"
	"errors"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func (d *Daemon) dnsProviderRoutes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.SetDNSProvider, d.setDNSProvider),
		rpc.Bind(rpc.ListDNSProviders, d.listDNSProviders),
		rpc.Bind(rpc.RemoveDNSProvider, d.removeDNSProvider),
	}
}

// dnsSecretsSealer seals DNS providers' secret settings with this
// Machine's Cluster secret, as the ingress plugin opens them.
func (d *Daemon) dnsSecretsSealer() (*store.Sealer, error) {
	return d.clusterSealer(ingress.DNSProviderSecretsPurpose, "certificates", ingress.DNSProviderSecretsField, "the DNS provider's secrets")
}

// setDNSProvider checks the provider (naming the field on a refusal),
// seals its secrets and writes its row; nothing is written on a refusal.
func (d *Daemon) setDNSProvider(ctx context.Context, req rpc.SetDNSProviderRequest) (rpc.DNSProviderView, error) {
	st, err := d.checkedStore(req)
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
	row, err := d.dnsProviderRow(p, time.Now())
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	if _, err := st.Certificates().Put(ctx, row); err != nil {
		return rpc.DNSProviderView{}, rpc.Errorf(rpc.CodeUnavailable, "write DNS provider: %v", err)
	}
	return dnsProviderView(row), nil
}

// dnsProviderRow is p's certificates row, its secrets sealed.
func (d *Daemon) dnsProviderRow(p ingress.DNSProvider, now time.Time) (sdkstore.Row[sdkstore.CertificateBody], error) {
	row := sdkstore.Row[sdkstore.CertificateBody]{Key: ingress.DNSProviderRow(p.Name), Owner: d.record().ID,
		Body: sdkstore.CertificateBody{Source: ingress.CertSourceDNSProvider, AddedAt: now.Unix(),
			DNSProvider: &sdkstore.DNSProviderBody{Provider: p.Provider, Zone: p.Zone, Settings: p.Settings}}}
	if len(p.Secrets) == 0 {
		return row, nil
	}
	sealer, err := d.dnsSecretsSealer()
	if err != nil {
		return row, err
	}
	raw, _ := json.Marshal(p.Secrets) // a map of strings always marshals
	if row.Body.DNSProvider.Secrets, err = sealer.Seal(row.Key, raw); err != nil {
		return row, rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	return row, nil
}

// listDNSProviders answers every provider row, secrets named only.
func (d *Daemon) listDNSProviders(ctx context.Context, _ rpc.None) (rpc.DNSProviderList, error) {
	st, err := d.storeClient()
	if err != nil {
		return rpc.DNSProviderList{}, err
	}
	rows, err := st.Certificates().List(ctx)
	if err != nil {
		return rpc.DNSProviderList{}, rpc.Errorf(rpc.CodeUnavailable, "read certificates: %v", err)
	}
	out := rpc.DNSProviderList{Providers: []rpc.DNSProviderView{}}
	for _, r := range rows {
		if isDNSProviderRow(r) {
			out.Providers = append(out.Providers, dnsProviderView(r))
		}
	}
	slices.SortFunc(out.Providers, func(a, b rpc.DNSProviderView) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// removeDNSProvider deletes the provider name; the names of its zone go
// back to HTTP-01 (wildcards to no certificate).
func (d *Daemon) removeDNSProvider(ctx context.Context, req rpc.RemoveDNSProviderRequest) (rpc.DNSProviderView, error) {
	st, err := d.checkedStore(req)
	if err != nil {
		return rpc.DNSProviderView{}, err
	}
	rows, err := st.Certificates().List(ctx)
	if err != nil {
		return rpc.DNSProviderView{}, rpc.Errorf(rpc.CodeUnavailable, "read certificates: %v", err)
	}
	key := ingress.DNSProviderRow(strings.ToLower(strings.TrimPrefix(req.Name, ingress.DNSProviderPrefix)))
	for _, r := range rows {
		if r.Key != key || !isDNSProviderRow(r) {
			continue
		}
		if _, err := st.Certificates().Delete(ctx, r.Key); err != nil {
			return rpc.DNSProviderView{}, rpc.Errorf(rpc.CodeUnavailable, "remove DNS provider %s: %v", req.Name, err)
		}
		return dnsProviderView(r), nil
	}
	return rpc.DNSProviderView{}, rpc.Errorf(rpc.CodeNotFound, "no DNS provider named %q (ployz cert dns-provider ls)", req.Name)
}

func isDNSProviderRow(r sdkstore.Row[sdkstore.CertificateBody]) bool {
	return r.Body.Source == ingress.CertSourceDNSProvider || strings.HasPrefix(r.Key, ingress.DNSProviderPrefix)
}

// dnsProviderView is a provider row as operators see it: the secrets'
// names from its kind, never their values (sealed, not opened here).
func dnsProviderView(r sdkstore.Row[sdkstore.CertificateBody]) rpc.DNSProviderView {
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
