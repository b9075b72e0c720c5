package certificates

import (
	"context"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Host is what the feature needs of the daemon.
type Host interface {
	feature.StoreHost
	// DataDir is the daemon's data directory, where the Cluster secret
	// the rows are sealed with is.
	DataDir() string
}

// Feature serves the certificates table's operator commands.
type Feature struct{ host Host }

// New returns the feature over host.
func New(host Host) *Feature { return &Feature{host: host} }

// Routes are the user certificates' and the DNS providers' commands.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.AddCertificate, f.addCertificate),
		rpc.Bind(rpc.ListCertificates, f.listCertificates),
		rpc.Bind(rpc.RemoveCertificate, f.removeCertificate),
		rpc.Bind(rpc.SetDNSProvider, f.setDNSProvider),
		rpc.Bind(rpc.ListDNSProviders, f.listDNSProviders),
		rpc.Bind(rpc.RemoveDNSProvider, f.removeDNSProvider),
	}
}

// row is one row of the certificates table.
type row = sdkstore.Row[sdkstore.CertificateBody]

// sealing is a field of the certificates table sealed with the Cluster
// secret, as the ingress plugin opens it; what names it in a refusal.
type sealing struct{ purpose, field, what string }

var (
	// userKeys are user certificates' private keys.
	userKeys = sealing{store.CertificateKeysPurpose, "key_pem", "the private key"}
	// dnsSecrets are DNS providers' secret settings.
	dnsSecrets = sealing{ingress.DNSProviderSecretsPurpose, ingress.DNSProviderSecretsField, "the DNS provider's secrets"}
)

// seal seals plain as s of the row key.
func (f *Feature) seal(s sealing, key string, plain []byte) (string, error) {
	sealer, err := feature.ClusterSealer(f.host.DataDir(), s.purpose, "certificates", s.field, s.what)
	if err != nil {
		return "", err
	}
	out, err := sealer.Seal(key, plain)
	if err != nil {
		return "", rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	return out, nil
}

// put writes r, what naming it in the refusal.
func put(ctx context.Context, st *sdkstore.Client, r row, what string) error {
	if _, err := st.Certificates().Put(ctx, r); err != nil {
		return rpc.Errorf(rpc.CodeUnavailable, "write %s: %v", what, err)
	}
	return nil
}

// rows lists the table, req checked first (nil for a list).
func (f *Feature) rows(ctx context.Context, req interface{ Validate() error }) (*sdkstore.Client, []row, error) {
	var st *sdkstore.Client
	var err error
	if req == nil {
		st, err = f.host.Store()
	} else {
		st, err = feature.CheckedStore(f.host, req)
	}
	if err != nil {
		return nil, nil, err
	}
	rows, err := st.Certificates().List(ctx)
	if err != nil {
		return nil, nil, rpc.Errorf(rpc.CodeUnavailable, "read certificates: %v", err)
	}
	return st, rows, nil
}

// views are the rows keep keeps, as view shows them.
func views[V any](rows []row, keep func(row) bool, view func(row) V) []V {
	out := []V{}
	for _, r := range rows {
		if keep(r) {
			out = append(out, view(r))
		}
	}
	return out
}

// remove deletes the rows match picks, in order, stopping at the first
// failure, which names the row as what says; it answers those deleted.
func remove(ctx context.Context, st *sdkstore.Client, rows []row, match func(row) bool, what func(row) string) ([]row, error) {
	var out []row
	for _, r := range rows {
		if !match(r) {
			continue
		}
		if _, err := st.Certificates().Delete(ctx, r.Key); err != nil {
			return out, rpc.Errorf(rpc.CodeUnavailable, "remove %s: %v", what(r), err)
		}
		out = append(out, r)
	}
	return out, nil
}
