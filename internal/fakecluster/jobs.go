package fakecluster

import (
	"slices"
	"sort"
	"strings"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// jobRoutes answers put_jobs and list_jobs from Cluster.Jobs and
// Cluster.JobRuns, and put_volume_policies into Cluster.VolumePolicies.
func (fc *Cluster) jobRoutes(srv *rpc.Server, m *Machine) {
	HandleMethod(fc, srv, m, rpc.PutJobs, valid(func(req rpc.PutJobsRequest) (rpc.JobsPut, error) {
		out := rpc.JobsPut{Stored: []string{}}
		declared := map[string]bool{}
		for _, j := range req.Jobs {
			fc.Jobs[req.Namespace+"/"+j.Service] = j
			declared[j.Service] = true
			out.Stored = append(out.Stored, j.Service)
		}
		for k := range fc.Jobs {
			ns, svc, _ := strings.Cut(k, "/")
			if req.Prune && ns == req.Namespace && !declared[svc] {
				delete(fc.Jobs, k)
				out.Removed = append(out.Removed, svc)
			}
		}
		return out, nil
	}))
	HandleMethod(fc, srv, m, rpc.PutVolumePolicies, valid(func(req rpc.PutVolumePoliciesRequest) (rpc.VolumePoliciesPut, error) {
		out := rpc.VolumePoliciesPut{Stored: []string{}}
		for _, p := range req.Policies {
			fc.VolumePolicies[p.Volume] = store.VolumePolicyBody{Namespace: req.Namespace, Volume: p.Volume, Deployment: req.Deployment, Policy: p.Policy}
			out.Stored = append(out.Stored, p.Volume)
		}
		for k, b := range fc.VolumePolicies {
			if req.Prune && b.Namespace == req.Namespace && !slices.Contains(out.Stored, k) {
				delete(fc.VolumePolicies, k)
				out.Removed = append(out.Removed, k)
			}
		}
		return out, nil
	}))
	HandleMethod(fc, srv, m, rpc.ListJobs, valid(func(req rpc.ListJobsRequest) (rpc.JobList, error) {
		out := rpc.JobList{Jobs: []rpc.JobView{}}
		for k, j := range fc.Jobs {
			ns, _, _ := strings.Cut(k, "/")
			if req.Namespace != "" && ns != req.Namespace {
				continue
			}
			v := rpc.JobView{Namespace: ns, Service: j.Service, Cron: j.Schedule.Cron, Timezone: j.Schedule.Timezone,
				Concurrency: j.Schedule.Concurrency, Image: j.Spec.Image, Runs: fc.JobRuns[k]}
			if v.Runs == nil {
				v.Runs = []store.JobRunBody{}
			}
			out.Jobs = append(out.Jobs, v)
		}
		sort.Slice(out.Jobs, func(a, b int) bool { return out.Jobs[a].Service < out.Jobs[b].Service })
		return out, nil
	}))
}
