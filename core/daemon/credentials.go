package daemon

import (
	"context"

	"github.com/ployz/ployz/sdk/ingress"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// credentialSealer is the sealer of basic_auth hashes in this Machine's
// containers rows, or nil to write them plain: while a participating
// Machine runs an ingress that cannot open them (an older release, which
// would admit nobody), when the machines table cannot be read, or when
// this Machine has no Cluster secret.
func (d *Daemon) credentialSealer(ctx context.Context, st *sdkstore.Client) *sdkstore.Sealer {
	rows, err := st.Machines().List(ctx)
	if err != nil {
		return nil
	}
	if ok, _ := ingress.SealingAllowed(rows, ingress.CapSealedAuth); !ok {
		return nil
	}
	s, err := d.clusterSealer(ingress.CredentialsPurpose, "containers", "basic_auth", "password hashes")
	if err != nil {
		return nil
	}
	return s
}
