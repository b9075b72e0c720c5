package deploy

import (
	"fmt"
)

// Pull policies, as compose's pull_policy and `deploy --pull` name them.
const (
	// PullMissing pulls an image on a Machine that lacks it (default).
	PullMissing = "missing"
	// PullAlways pulls before every Container a plan creates, once per
	// Machine and image.
	PullAlways = "always"
	// PullNever never pulls: an image must be pushed to the Machines.
	PullNever = "never"
)

// ParsePullPolicy checks a --pull value.
func ParsePullPolicy(s string) (string, error) {
	switch s {
	case "", PullMissing, PullAlways, PullNever:
		return s, nil
	}
	return "", fmt.Errorf("--pull: %q is not always, missing or never", s)
}

// pullPolicy is the policy for one Service: never for a built image
// (it reaches Machines by push), else the deploy's, else the Service's
// own, else PullMissing.
func pullPolicy(deploy string, s Service) string {
	if s.Build != nil {
		return PullNever
	}
	for _, p := range []string{deploy, s.PullPolicy} {
		if p != "" {
			return p
		}
	}
	return PullMissing
}

// markPulls sets Pull on the first row per Machine and image that creates
// a Container when its policy asks: always, or missing and the Machine is
// seen to lack the image. A Machine whose images are unknown is not told
// to pull: its create says whether the image is there.
func markPulls(rows []Row, snap Snapshot, deployPolicy string, app App) {
	policy := map[string]string{}
	for _, s := range app.Services {
		policy[s.Name] = pullPolicy(deployPolicy, s)
	}
	machines := map[string]MachineState{}
	for _, m := range snap.Machines {
		machines[m.ID] = m
	}
	done := map[[2]string]bool{}
	for i := range rows {
		r := &rows[i]
		if r.Spec == nil || (r.Op != OpCreate && r.Op != OpReplace && r.Op != OpHook) {
			continue
		}
		key := [2]string{r.MachineID, r.Spec.Image}
		if done[key] {
			continue
		}
		m := machines[r.MachineID]
		switch policy[r.Service] {
		case PullAlways:
			r.Pull = true
		case PullMissing:
			r.Pull = m.ImagesKnown && !HasImage(m.Images, r.Spec.Image)
		}
		done[key] = r.Pull
	}
}
