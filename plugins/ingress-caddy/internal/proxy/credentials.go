package proxy

import (
	"slices"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/ingress"
	"github.com/ployz/ployz/sdk/store"
)

// credentials opens the basic_auth hashes ployzd seals in the containers
// rows. A nil sealer (the spec names no Cluster secret) opens none: a
// route whose hashes are sealed then admits nobody.
type credentials struct {
	sealer  *store.Sealer
	lastErr string // the last failure logged
}

// loadCredentials reads the Cluster secret the spec names (0600), if any.
func loadCredentials(spec ingress.Spec) (*credentials, error) {
	if spec.ClusterSecretFile == "" {
		return &credentials{}, nil
	}
	secret, err := store.ReadClusterSecretFile(spec.ClusterSecretFile)
	if err != nil {
		return nil, err
	}
	s, err := ingress.NewCredentialsSealer(secret)
	if err != nil {
		return nil, err
	}
	return &credentials{sealer: s}, nil
}

// open returns rows with their sealed hashes opened (copies: the rows
// given are not changed); a failure is logged when it differs from the
// last one.
func (c *credentials) open(rows []store.Row[store.ContainerBody], log hclog.Logger) []store.Row[store.ContainerBody] {
	if c == nil {
		c = &credentials{}
	}
	out := slices.Clone(rows)
	failed := ""
	for i := range out {
		if err := ingress.OpenCredentials(out[i].Key, &out[i].Body, c.sealer); err != nil && failed == "" {
			failed = err.Error()
		}
	}
	if failed != c.lastErr && failed != "" {
		log.Warn("basic auth: a route's sealed password hashes do not open; it admits nobody", "error", failed)
	}
	c.lastErr = failed
	return out
}
