package ingress

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/ployz/ployz/sdk/ingress/routeopt"
	"github.com/ployz/ployz/sdk/store"
)

// Basic auth password hashes are sealed in the containers rows, so a
// reader of the store who is not a Machine (no Cluster secret) sees the
// user names but no hash to attack offline.
const (
	// CredentialsPurpose derives the key that seals them.
	CredentialsPurpose = "route-credentials"
	// CapSealedAuth: opens sealed basic_auth hashes (the proxy was given
	// the Cluster secret). ployzd seals them only once every participating
	// Machine running an ingress advertises it.
	CapSealedAuth = "ployz.ingress.sealed-auth.v1"
)

// NewCredentialsSealer is the sealer of basic_auth hashes under secret.
func NewCredentialsSealer(secret store.ClusterSecret) (*store.Sealer, error) {
	return store.NewSealer(secret, CredentialsPurpose, "containers", "basic_auth")
}

// credentialRow binds a sealed hash to its Container row, its route and
// its user: moved anywhere else it does not open.
func credentialRow(container string, rt store.IngressRoute, user string) string {
	return container + "\x00" + strings.ToLower(rt.Hostname) + rt.Path + "\x00" + user
}

// SealCredentials seals every plain hash of b's basic_auth users, in
// copies (b's maps may be shared with the spec it came from). Sealing is
// stable (store.Sealer.SealStable): the same hash seals to the same text,
// so a rescan finds the row unchanged.
func SealCredentials(container string, b *store.ContainerBody, s *store.Sealer) error {
	return mapCredentials(container, b, func(row, hash string) (string, error) {
		if strings.HasPrefix(hash, "enc:") {
			return hash, nil
		}
		return s.SealStable(row, []byte(hash))
	})
}

// OpenCredentials opens the sealed hashes of b's basic_auth users, in
// copies. A hash that does not open (no sealer, another Cluster's,
// tampered with) stays sealed, which no password matches: the route then
// admits nobody (fails closed); the error names the row and user.
func OpenCredentials(container string, b *store.ContainerBody, s *store.Sealer) error {
	var errs []string
	_ = mapCredentials(container, b, func(row, hash string) (string, error) {
		if !strings.HasPrefix(hash, "enc:") {
			return hash, nil
		}
		if s == nil {
			errs = append(errs, "no Cluster secret to open a sealed hash")
			return hash, nil
		}
		plain, err := s.Open(row, hash)
		if err != nil {
			errs = append(errs, err.Error())
			return hash, nil
		}
		return string(plain), nil
	})
	if len(errs) > 0 {
		return fmt.Errorf("container %s: basic_auth: %s", container, strings.Join(errs, "; "))
	}
	return nil
}

// mapCredentials replaces each basic_auth hash of b with f's answer.
func mapCredentials(container string, b *store.ContainerBody, f func(row, hash string) (string, error)) error {
	if !hasCredentials(b) {
		return nil
	}
	routes := make([]store.IngressRoute, len(b.Ingress))
	for i, rt := range b.Ingress {
		routes[i] = rt
		if rt.BasicAuth == nil {
			continue
		}
		a := &routeopt.BasicAuth{Realm: rt.BasicAuth.Realm, Users: maps.Clone(rt.BasicAuth.Users)}
		for user, hash := range a.Users {
			v, err := f(credentialRow(container, rt, user), hash)
			if err != nil {
				return err
			}
			a.Users[user] = v
		}
		routes[i].BasicAuth = a
	}
	b.Ingress = routes
	return nil
}

func hasCredentials(b *store.ContainerBody) bool {
	for _, rt := range b.Ingress {
		if rt.BasicAuth != nil && len(rt.BasicAuth.Users) > 0 {
			return true
		}
	}
	return false
}

// SealingAllowed reports whether every participating Machine running an
// ingress advertises capability (one that opens a sealed field); if not,
// it names one that does not. A row with no capabilities at all is a
// version older than capabilities, and older than sealing.
func SealingAllowed(rows []store.Row[store.MachineBody], capability string) (bool, string) {
	for _, r := range rows {
		if r.Body.Phase != "participating" {
			continue
		}
		caps := r.Body.Capabilities
		if len(caps) == 0 || (slices.Contains(caps, CapHTTP) && !slices.Contains(caps, capability)) {
			name := r.Body.Name
			if name == "" {
				name = r.Key
			}
			return false, fmt.Sprintf("machine %s (version %q) does not advertise %s", name, r.Body.Version, capability)
		}
	}
	return true, ""
}
