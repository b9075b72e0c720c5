package client

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// rollback is the revision a rollback deploys and the images its
// Deploy ran (from its deploy record), for build: Services.
type rollback struct {
	state  operator.SavedState
	images map[string]string
}

// rollbackTarget reads the revision to return to: to, else the newest
// revision below the latest whose Deploy completed. A removal's empty
// revision is refused; nothing is changed by any refusal.
func (s *Session) rollbackTarget(ctx context.Context, p Project, to int) (rollback, error) {
	project, env := p.Name, p.Environment
	latest, err := s.latestState(ctx, p)
	if err != nil {
		return rollback{}, fmt.Errorf("%w: nothing to roll back to", err)
	}
	records, err := s.namespaceRecords(ctx, deploy.Namespace(project, env))
	if err != nil {
		return rollback{}, err
	}
	rev := to
	if rev == 0 {
		if rev = previousCompleted(records, latest.Revision); rev == 0 {
			return rollback{}, fmt.Errorf("%s: no completed Deploy of a revision before %d is recorded (in the Cluster, or on this computer for an older entry); --to REVISION names one",
				deploy.Namespace(project, env), latest.Revision)
		}
	}
	state, err := s.stateAt(ctx, p, rev)
	if err != nil {
		return rollback{}, err
	}
	if len(state.Compose) == 0 {
		return rollback{}, fmt.Errorf("revision %d of %s is its removal; roll back to a revision that ran it", rev, deploy.Namespace(project, env))
	}
	return rollback{state: state, images: recordedImages(records, rev)}, nil
}

// PlanRollback plans a Deploy of p's revision to again (0: the newest
// revision below the latest whose Deploy completed), through the normal
// plan, confirmation and zero-gap path; applied, it is saved as a new
// revision. Each build: Service runs the image that revision's Deploy
// ran; an image no Machine holds and no registry supplies is refused
// before anything changes.
func (s *Session) PlanRollback(ctx context.Context, p Project, to int, dryRun bool, readyTimeout time.Duration) (*DeployPlan, error) {
	if to < 0 {
		return nil, fmt.Errorf("--to %d: a revision is a number from 1", to)
	}
	target, err := s.rollbackTarget(ctx, p, to)
	if err != nil {
		return nil, err
	}
	return s.PlanDeploy(ctx, DeployRequest{Compose: target.state.Compose, File: "compose.yaml", Project: target.state.Project,
		Environment: target.state.Environment, NoBuild: true, DryRun: dryRun, ReadyTimeout: readyTimeout,
		Why: fmt.Sprintf("rollback to revision %d", target.state.Revision), Images: target.images, NeedImages: true})
}

// namespaceRecords are the context's deploy records of namespace ns,
// newest first.
func namespaceRecords(st *operator.Store, ctxName, ns string) ([]deploy.Record, error) {
	rows, err := st.Deploys(ctxName, operator.KeepDeploys)
	if err != nil {
		return nil, err
	}
	var out []deploy.Record
	now := time.Now()
	for _, r := range rows {
		if r.Namespace != ns {
			continue
		}
		rec, err := deploy.ParseRecord(r.Body, now)
		if err != nil {
			return nil, fmt.Errorf("deploy %s: %w", r.DeploymentID, err)
		}
		out = append(out, rec)
	}
	return out, nil
}

// previousCompleted is the newest revision below latest whose Deploy
// completed, or 0.
func previousCompleted(records []deploy.Record, latest int) int {
	best := 0
	for _, r := range records {
		if r.Status == deploy.RecordCompleted && r.Revision > 0 && r.Revision < latest && r.Revision > best {
			best = r.Revision
		}
	}
	return best
}

// recordedImages are the images the newest Deploy of rev ran.
func recordedImages(records []deploy.Record, rev int) map[string]string {
	for _, r := range records {
		if r.Revision == rev && len(r.Images) > 0 {
			return r.Images
		}
	}
	return nil
}

// pinImages makes each build: Service of app run the image a rollback's
// revision ran instead of building: the revision keeps the compose file,
// not the build's result. A build: Service with no recorded image is
// refused, since the rollback could not tell which build it ran.
func pinImages(app *deploy.App, images map[string]string, why string) error {
	var unknown []string
	for i := range app.Services {
		s := &app.Services[i]
		if s.Build == nil {
			continue
		}
		img, ok := images[s.Name]
		if !ok {
			unknown = append(unknown, s.Name)
			continue
		}
		s.Spec.Image, s.Build = img, nil
	}
	if len(unknown) > 0 {
		return fmt.Errorf("%s: service %v is built (build:) and no deploy record of that revision names the image it ran; deploy its source again instead", why, unknown)
	}
	return nil
}

// errImagesNowhere refuses a rollback whose images no Machine holds and
// no registry supplies, before anything changes.
func errImagesNowhere(missing []deploy.MissingImage) error {
	var errs []error
	for _, m := range missing {
		errs = append(errs, fmt.Errorf("service %s: image %s is on no Machine and names no registry (`ployz image push %s` brings it back if this computer's Docker has it)", m.Service, m.Image, m.Image))
	}
	return fmt.Errorf("refusing the rollback, nothing changed: %w", errors.Join(errs...))
}
