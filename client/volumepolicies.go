package client

import (
	"context"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/volprotect"
)

// storeVolumePolicies stores the x-volume policies of the compose file's
// Provisioned Volumes through the entry (put_volume_policies); unless
// prune is off, the namespace's policies the file no longer declares are
// deleted. An entry from before volume protection is refused only when
// the file declares a policy.
func (s *Session) storeVolumePolicies(ctx context.Context, ns, deployment string, pvs []deploy.ProvisionedVolume, prune bool) error {
	req := rpc.PutVolumePoliciesRequest{Namespace: ns, Deployment: deployment, Policies: []rpc.VolumePolicyDecl{}, Prune: prune}
	for _, pv := range pvs {
		if pv.Protect != nil {
			req.Policies = append(req.Policies, rpc.VolumePolicyDecl{Volume: pv.Name, Policy: *pv.Protect})
		}
	}
	var out rpc.VolumePoliciesPut
	err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.PutVolumePolicies, req, &out)
	return putThroughEntry(err, "the x-volume policies of "+ns, rpc.CmdPutVolumePolicies, len(req.Policies) > 0)
}

// VolumePolicies are the x-volume policies the latest Saved States
// declare, by volume name: what their deploys stored in the Cluster (the
// operator reads no policy table). A Saved State that no longer loads is
// left out.
func (s *Session) VolumePolicies(ctx context.Context) (map[string]volprotect.Policy, error) {
	states, err := s.LatestSaved(ctx)
	if err != nil {
		return nil, err
	}
	out := map[string]volprotect.Policy{}
	for _, st := range states {
		app, err := loadDeclarations(ctx, st)
		if err != nil {
			continue
		}
		for _, pv := range app.Provisioned {
			if pv.Protect != nil {
				out[pv.Name] = *pv.Protect
			}
		}
	}
	return out, nil
}
