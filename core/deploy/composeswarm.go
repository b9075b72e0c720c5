package deploy

import (
	"fmt"
	"strings"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/ployz/ployz/core/rpc"
)

// Swarm's deploy: keys, mapped onto Ployz placement and rollout.

// swarmDeploy maps deploy.placement (constraints, max_replicas_per_node),
// deploy.update_config.order and deploy.restart_policy.
func swarmDeploy(svc *Service, spec *rpc.ContainerSpec, d *types.DeployConfig) ([]string, error) {
	if d == nil {
		return nil, nil
	}
	var warns []string
	for i, c := range d.Placement.Constraints {
		pc, err := swarmConstraint(c)
		if err != nil {
			return nil, fmt.Errorf("deploy.placement.constraints[%d]: %w", i, err)
		}
		svc.Constraints = append(svc.Constraints, pc)
	}
	if len(d.Placement.Preferences) > 0 {
		warns = append(warns, `key "deploy.placement.preferences" is ignored: Ployz spreads a Service's Containers over its eligible Machines, least loaded first`)
	}
	if d.Placement.MaxReplicas > 0 {
		svc.MaxPerMachine = int(d.Placement.MaxReplicas)
	}
	if u := d.UpdateConfig; u != nil {
		switch u.Order {
		case "":
		case StartFirst, StopFirst:
			svc.UpdateOrder = u.Order
		default:
			return nil, fmt.Errorf("deploy.update_config.order: %q is not start-first or stop-first", u.Order)
		}
		if u.Parallelism != nil || u.Delay != 0 || u.FailureAction != "" || u.Monitor != 0 || u.MaxFailureRatio != 0 {
			warns = append(warns, `key "deploy.update_config" is ignored but for order: Ployz replaces one Container at a time per Machine and stops at the first that does not become ready`)
		}
	}
	if p := d.RestartPolicy; p != nil {
		w, err := restartPolicy(spec, p)
		if err != nil {
			return nil, err
		}
		warns = append(warns, w...)
	}
	return warns, nil
}

// swarmConstraint parses one Swarm placement constraint: node.labels.X
// becomes Machine label X, node.hostname the Machine's name.
func swarmConstraint(s string) (rpc.Constraint, error) {
	c, err := ParseConstraint(s)
	if err != nil {
		return c, err
	}
	switch {
	case strings.HasPrefix(c.Label, "node.labels."):
		c.Label = strings.TrimPrefix(c.Label, "node.labels.")
		if c.Label == "" {
			return c, fmt.Errorf("%q: empty label", s)
		}
	case c.Label == "node.hostname":
		c.Label = rpc.ConstraintMachineName
	case strings.HasPrefix(c.Label, "node.") || strings.HasPrefix(c.Label, "engine.labels."):
		return c, fmt.Errorf("%q: %s is not supported; use node.labels.NAME (Machine labels) or node.hostname", s, c.Label)
	default:
		return c, fmt.Errorf("%q: want node.labels.NAME or node.hostname", s)
	}
	return c, nil
}

// restartPolicy maps deploy.restart_policy as Docker Compose does: it
// takes precedence over restart.
func restartPolicy(spec *rpc.ContainerSpec, p *types.RestartPolicy) ([]string, error) {
	var warns []string
	switch p.Condition {
	case "none", "no":
		spec.Restart = "no"
	case "", "any", "always":
		spec.Restart = "always"
	case "unless-stopped":
		spec.Restart = "unless-stopped"
	case "on-failure":
		spec.Restart = "on-failure"
		if p.MaxAttempts != nil {
			spec.Restart = fmt.Sprintf("on-failure:%d", *p.MaxAttempts)
		}
	default:
		return nil, fmt.Errorf("deploy.restart_policy.condition: %q is not none, on-failure or any", p.Condition)
	}
	if p.MaxAttempts != nil && p.Condition != "on-failure" {
		warns = append(warns, `key "deploy.restart_policy.max_attempts" is ignored: Docker counts attempts only for on-failure`)
	}
	if p.Delay != nil || p.Window != nil {
		warns = append(warns, `key "deploy.restart_policy.delay/window" is ignored: Docker restarts with its own back-off`)
	}
	return warns, nil
}
