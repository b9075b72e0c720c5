package daemon

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

func (d *Daemon) certificateRoutes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.AddCertificate, d.addCertificate),
		rpc.Bind(rpc.ListCertificates, d.listCertificates),
		rpc.Bind(rpc.RemoveCertificate, d.removeCertificate),
	}
}

// certificateSealer seals certificate private keys with this Machine's
// Cluster secret, as the ingress plugin opens them.
func (d *Daemon) certificateSealer() (*store.Sealer, error) {
	return d.clusterSealer(store.CertificateKeysPurpose, "certificates", "key_pem", "the private key")
}

// addCertificate checks the pair again (the operator's check is not
// trusted), seals the key and writes the user certificate's row; nothing
// is written when any check fails. Adding the same certificate again
// rewrites its row.
func (d *Daemon) addCertificate(ctx context.Context, req rpc.AddCertificateRequest) (rpc.CertificateView, error) {
	st, err := d.checkedStore(req)
	if err != nil {
		return rpc.CertificateView{}, err
	}
	u, err := ingress.CheckUserCertificate([]byte(req.CertPEM), []byte(req.KeyPEM), time.Now())
	if err != nil {
		field, why, _ := strings.Cut(err.Error(), ": ")
		return rpc.CertificateView{}, rpc.InvalidField(field+"_pem", "%s", why)
	}
	sealer, err := d.certificateSealer()
	if err != nil {
		return rpc.CertificateView{}, err
	}
	row := sdkstore.Row[sdkstore.CertificateBody]{Key: ingress.UserCertRow(u.ID), Owner: d.record().ID, Body: UserCertificateBody(u, time.Now())}
	if row.Body.KeyPEM, err = sealer.Seal(row.Key, []byte(u.KeyPEM)); err != nil {
		return rpc.CertificateView{}, rpc.Errorf(rpc.CodeInternal, "%v", err)
	}
	row.Body.Issuer = d.record().ID
	if _, err := st.Certificates().Put(ctx, row); err != nil {
		return rpc.CertificateView{}, rpc.Errorf(rpc.CodeUnavailable, "write certificate: %v", err)
	}
	return certificateView(row), nil
}

// UserCertificateBody is u's certificates row body, key_pem still plain.
func UserCertificateBody(u ingress.UserCertificate, now time.Time) sdkstore.CertificateBody {
	return sdkstore.CertificateBody{Source: ingress.CertSourceUser, Domains: u.Names, CertPEM: u.CertPEM, KeyPEM: u.KeyPEM,
		NotBefore: u.NotBefore.Unix(), NotAfter: u.NotAfter.Unix(), CA: u.Issuer, AddedAt: now.Unix()}
}

// listCertificates answers every certificates row without key material:
// user certificates by id, ACME ones by name.
func (d *Daemon) listCertificates(ctx context.Context, _ rpc.None) (rpc.CertificateList, error) {
	st, err := d.storeClient()
	if err != nil {
		return rpc.CertificateList{}, err
	}
	rows, err := st.Certificates().List(ctx)
	if err != nil {
		return rpc.CertificateList{}, rpc.Errorf(rpc.CodeUnavailable, "read certificates: %v", err)
	}
	out := rpc.CertificateList{Certificates: []rpc.CertificateView{}}
	for _, r := range rows {
		if r.Body.CertPEM == "" && !isUserCertRow(r) {
			continue // an issuance that never succeeded: ingress status tells its story
		}
		out.Certificates = append(out.Certificates, certificateView(r))
	}
	slices.SortFunc(out.Certificates, func(a, b rpc.CertificateView) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(strings.Join(a.Names, ","), strings.Join(b.Names, ",")), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// removeCertificate deletes the user certificates whose id is Name (the
// row name "user:…" too) or that name Name among their names.
func (d *Daemon) removeCertificate(ctx context.Context, req rpc.RemoveCertificateRequest) (rpc.CertificatesRemoved, error) {
	st, err := d.checkedStore(req)
	if err != nil {
		return rpc.CertificatesRemoved{}, err
	}
	rows, err := st.Certificates().List(ctx)
	if err != nil {
		return rpc.CertificatesRemoved{}, rpc.Errorf(rpc.CodeUnavailable, "read certificates: %v", err)
	}
	name := strings.ToLower(strings.TrimPrefix(req.Name, ingress.UserCertPrefix))
	out := rpc.CertificatesRemoved{Removed: []rpc.CertificateView{}}
	acme := false
	for _, r := range rows {
		v := certificateView(r)
		if !isUserCertRow(r) {
			acme = acme || strings.EqualFold(r.Key, name)
			continue
		}
		if v.ID != name && !slices.Contains(v.Names, name) {
			continue
		}
		if _, err := st.Certificates().Delete(ctx, r.Key); err != nil {
			return out, rpc.Errorf(rpc.CodeUnavailable, "remove certificate %s: %v", v.ID, err)
		}
		out.Removed = append(out.Removed, v)
	}
	if len(out.Removed) == 0 {
		if acme {
			return out, rpc.InvalidField("name", "%q is an ACME certificate: it is renewed while a route needs it, and only user certificates are removed", req.Name)
		}
		return out, rpc.Errorf(rpc.CodeNotFound, "no user certificate has id or name %q (ployz cert ls)", req.Name)
	}
	return out, nil
}

func isUserCertRow(r sdkstore.Row[sdkstore.CertificateBody]) bool {
	return r.Body.Source == ingress.CertSourceUser || strings.HasPrefix(r.Key, ingress.UserCertPrefix)
}

// certificateView is a row as operators see it: no key, no challenge.
// Fields a row lacks are read from its leaf, when it has one.
func certificateView(r sdkstore.Row[sdkstore.CertificateBody]) rpc.CertificateView {
	b := r.Body
	v := rpc.CertificateView{Source: "acme", Names: b.Domains, Issuer: b.CA, NotBefore: b.NotBefore, NotAfter: b.NotAfter,
		AddedAt: b.AddedAt, Error: b.LastError}
	if isUserCertRow(r) {
		v.ID, v.Source = strings.TrimPrefix(r.Key, ingress.UserCertPrefix), ingress.CertSourceUser
	} else if len(v.Names) == 0 {
		v.Names = []string{strings.ToLower(r.Key)}
	}
	if leaf := leafOf(b.CertPEM); leaf != nil {
		v.Issuer = cmp.Or(v.Issuer, leaf.Issuer.String())
		v.NotBefore, v.NotAfter = cmp.Or(v.NotBefore, leaf.NotBefore.Unix()), cmp.Or(v.NotAfter, leaf.NotAfter.Unix())
		if len(v.Names) == 0 {
			v.Names = leaf.DNSNames
		}
	}
	return v
}

// leafOf is the first certificate of a PEM chain, or nil.
func leafOf(certPEM string) *x509.Certificate {
	blk, _ := pem.Decode([]byte(certPEM))
	if blk == nil || blk.Type != "CERTIFICATE" {
		return nil
	}
	leaf, err := x509.ParseCertificate(blk.Bytes)
	if err != nil {
		return nil
	}
	return leaf
}
