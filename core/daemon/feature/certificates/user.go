package certificates

import (
	"cmp"
	"context"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// addCertificate checks the pair again (the operator's check is not
// trusted), seals the key and writes the user certificate's row; nothing
// is written when any check fails. Adding the same certificate again
// rewrites its row.
func (f *Feature) addCertificate(ctx context.Context, req rpc.AddCertificateRequest) (rpc.CertificateView, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.CertificateView{}, err
	}
	u, err := ingress.CheckUserCertificate([]byte(req.CertPEM), []byte(req.KeyPEM), time.Now())
	if err != nil {
		field, why, _ := strings.Cut(err.Error(), ": ")
		return rpc.CertificateView{}, rpc.InvalidField(field+"_pem", "%s", why)
	}
	r := row{Key: ingress.UserCertRow(u.ID), Owner: f.host.MachineID(), Body: UserCertificateBody(u, time.Now())}
	if r.Body.KeyPEM, err = f.seal(userKeys, r.Key, []byte(u.KeyPEM)); err != nil {
		return rpc.CertificateView{}, err
	}
	r.Body.Issuer = f.host.MachineID()
	if err := put(ctx, st, r, "certificate"); err != nil {
		return rpc.CertificateView{}, err
	}
	return certificateView(r), nil
}

// UserCertificateBody is u's certificates row body, key_pem still plain.
func UserCertificateBody(u ingress.UserCertificate, now time.Time) sdkstore.CertificateBody {
	return sdkstore.CertificateBody{Source: ingress.CertSourceUser, Domains: u.Names, CertPEM: u.CertPEM, KeyPEM: u.KeyPEM,
		NotBefore: u.NotBefore.Unix(), NotAfter: u.NotAfter.Unix(), CA: u.Issuer, AddedAt: now.Unix()}
}

// listCertificates answers every certificates row without key material:
// user certificates by id, ACME ones by name.
func (f *Feature) listCertificates(ctx context.Context, _ rpc.None) (rpc.CertificateList, error) {
	_, rows, err := f.rows(ctx, nil)
	if err != nil {
		return rpc.CertificateList{}, err
	}
	// A row with no certificate is an issuance that never succeeded
	// (ingress status tells its story) or a DNS provider's.
	out := rpc.CertificateList{Certificates: views(rows, func(r row) bool { return r.Body.CertPEM != "" || isUserCertRow(r) }, certificateView)}
	slices.SortFunc(out.Certificates, func(a, b rpc.CertificateView) int {
		return cmp.Or(cmp.Compare(a.Source, b.Source), cmp.Compare(strings.Join(a.Names, ","), strings.Join(b.Names, ",")), cmp.Compare(a.ID, b.ID))
	})
	return out, nil
}

// removeCertificate deletes the user certificates whose id is Name (the
// row name "user:…" too) or that name Name among their names.
func (f *Feature) removeCertificate(ctx context.Context, req rpc.RemoveCertificateRequest) (rpc.CertificatesRemoved, error) {
	st, rows, err := f.rows(ctx, req)
	if err != nil {
		return rpc.CertificatesRemoved{}, err
	}
	name := strings.ToLower(strings.TrimPrefix(req.Name, ingress.UserCertPrefix))
	removed, err := remove(ctx, st, rows, func(r row) bool {
		if !isUserCertRow(r) {
			return false
		}
		v := certificateView(r)
		return v.ID == name || slices.Contains(v.Names, name)
	}, func(r row) string { return "certificate " + certificateView(r).ID })
	out := rpc.CertificatesRemoved{Removed: views(removed, func(row) bool { return true }, certificateView)}
	if err != nil {
		return out, err
	}
	if len(out.Removed) == 0 {
		if slices.ContainsFunc(rows, func(r row) bool { return !isUserCertRow(r) && strings.EqualFold(r.Key, name) }) {
			return out, rpc.InvalidField("name", "%q is an ACME certificate: it is renewed while a route needs it, and only user certificates are removed", req.Name)
		}
		return out, rpc.Errorf(rpc.CodeNotFound, "no user certificate has id or name %q (ployz cert ls)", req.Name)
	}
	return out, nil
}

func isUserCertRow(r row) bool {
	return r.Body.Source == ingress.CertSourceUser || strings.HasPrefix(r.Key, ingress.UserCertPrefix)
}

// certificateView is a row as operators see it: no key, no challenge.
// Fields a row lacks are read from its leaf, when it has one.
func certificateView(r row) rpc.CertificateView {
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
