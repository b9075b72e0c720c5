package deploy

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"strings"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

// Caller is the part of *rpc.Client the engine uses: one call to one
// Machine, or a fan-out to every Machine the entry observes.
type Caller interface {
	Call(ctx context.Context, t rpc.Target, command string, payload, out any) error
	Fanout(ctx context.Context, t rpc.Target, command string, payload any) (rpc.FanoutResult, error)
}

// SpecDigest is the SHA-256, as hex, of a ContainerSpec without its
// per-deploy fields (service id, deployment id, the hash itself): what
// the entry Machine salts into the spec hash (rpc.CmdSaltSpecHashes).
func SpecDigest(s rpc.ContainerSpec) string {
	sum := sha256.Sum256(specBytes(s))
	return hex.EncodeToString(sum[:])
}

// SpecHash is the unsalted spec hash versions before salting wrote (the
// digest's first 8 bytes): a Container still carrying it counts as up to
// date when the spec is the same (see SpecSalts).
func SpecHash(s rpc.ContainerSpec) string {
	return SpecDigest(s)[:16]
}

func specBytes(s rpc.ContainerSpec) []byte {
	s.ServiceID, s.DeploymentID, s.SpecHash = "", "", ""
	b, _ := json.Marshal(s) // maps marshal with sorted keys
	return b
}

// SpecSalts maps each spec digest of a Deploy to its salted spec hash,
// as the entry Machine computed it with the Cluster's spec-hash key
// (SaltSpecs). The planner never holds that key.
type SpecSalts map[string]string

// hash is the spec hash a plan writes for s: the salted one. Nil salts
// (planning in tests) give the unsalted hash; salts lacking s's digest
// are a planner bug, refused rather than writing an unsalted hash.
func (ss SpecSalts) hash(s rpc.ContainerSpec) (string, error) {
	if ss == nil {
		return SpecHash(s), nil
	}
	h, ok := ss[SpecDigest(s)]
	if !ok {
		return "", fmt.Errorf("spec of %s/%s (kind %q) was not salted by the entry Machine", s.Namespace, s.Service, s.Kind)
	}
	return h, nil
}

// AppSpecDigests lists the digest of every spec a plan of app can write
// (each Service's, each x-pre_deploy hook's), sorted, without repeats.
func AppSpecDigests(app App) []string {
	seen := map[string]bool{}
	var out []string
	add := func(s rpc.ContainerSpec) {
		if d := SpecDigest(s); !seen[d] {
			seen[d] = true
			out = append(out, d)
		}
	}
	for _, svc := range app.Services {
		base := serviceSpec(app.Namespace(), svc)
		add(base)
		for _, h := range svc.Hooks {
			add(hookSpec(base, h))
		}
	}
	sort.Strings(out)
	return out
}

// ErrUnsaltedEntry is returned by SaltSpecs when the entry Machine runs a
// version without rpc.CapSaltSpecHashes.
var ErrUnsaltedEntry = errors.New("the entry Machine cannot salt spec hashes")

// SaltSpecs asks the entry Machine, in one call, for the salted hash of
// every spec app can write. An entry too old to serve it is refused, not
// worked around: deploying through it would write unsalted hashes into
// the store, which is what salting exists to prevent.
func SaltSpecs(ctx context.Context, c Caller, app App) (SpecSalts, error) {
	digests := AppSpecDigests(app)
	if len(digests) == 0 {
		return SpecSalts{}, nil
	}
	var res rpc.SaltSpecHashesResult
	err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.SaltSpecHashes, rpc.SaltSpecHashesRequest{Digests: digests}, &res)
	var re *rpc.Error
	if errors.As(err, &re) && re.Code == rpc.CodeUnsupported {
		return nil, fmt.Errorf("%w: it lacks capability %s (it runs an older version); deploying through it would write unsalted spec hashes, "+
			"which let a reader of the store test guesses of environment values. Upgrade that Machine first (ployz machine upgrade), "+
			"or deploy through an upgraded Machine (--connect): %v", ErrUnsaltedEntry, rpc.CapSaltSpecHashes, err)
	}
	if err != nil {
		return nil, fmt.Errorf("salt spec hashes: %w", err)
	}
	if len(res.Hashes) != len(digests) {
		return nil, fmt.Errorf("salt spec hashes: field \"hashes\": %d hashes for %d digests", len(res.Hashes), len(digests))
	}
	out := SpecSalts{}
	for i, h := range res.Hashes {
		if len(h) != len(rpc.SaltedSpecHashPrefix)+16 || h[:len(rpc.SaltedSpecHashPrefix)] != rpc.SaltedSpecHashPrefix {
			return nil, fmt.Errorf("salt spec hashes: field \"hashes[%d]\": %q is not a salted spec hash", i, h)
		}
		out[digests[i]] = h
	}
	return out, nil
}

// NewID returns n random bytes as hex, for deployment ids, service ids
// and Container name suffixes.
func NewID(n int) string {
	b := make([]byte, n)
	rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// MachineState is one Machine as the Snapshot saw it.
type MachineState struct {
	ID         string                     `json:"id"`
	Name       string                     `json:"name"`
	Labels     map[string]string          `json:"labels,omitempty"`
	Membership string                     `json:"membership,omitempty"`
	Observed   bool                       `json:"observed"` // list_containers answered
	Containers []rpc.ContainerObservation `json:"containers,omitempty"`
	Volumes    []string                   `json:"volumes,omitempty"`
	// Writers are the Provisioned Volumes whose copy there is the Writer.
	Writers []string `json:"writers,omitempty"`
	// Held are the Provisioned Volumes with a dataset here, whatever the
	// copy's role; listed only when a plan may create one
	// (ObserveVolumes).
	Held []string `json:"held,omitempty"`
	// Images are the tags its Docker holds; ImagesKnown is false when
	// list_images did not answer.
	Images      []string `json:"images,omitempty"`
	ImagesKnown bool     `json:"images_known"`
	// Capabilities are what its daemon serves (from list_machines).
	Capabilities []string `json:"capabilities,omitempty"`
}

// LabelDrained marks a drained Machine (`ployz machine drain`): no new
// Container is placed there, and deploys move its Containers elsewhere.
const LabelDrained = rpc.MachineLabelDrained

// Drained reports whether the Machine is drained.
func (m MachineState) Drained() bool {
	_, ok := m.Labels[LabelDrained]
	return ok
}

// Unobserved names a Machine whose Containers the Snapshot lacks.
type Unobserved struct {
	MachineID string `json:"machine_id"`
	Name      string `json:"name,omitempty"`
	Reason    string `json:"reason"`
}

// Snapshot is one observer's live view of every Machine's Service
// Containers at one time (bet 1): never a complete Cluster truth, and it
// says which Machines it could not see.
type Snapshot struct {
	ObservedAt time.Time      `json:"observed_at"`
	Observer   string         `json:"observer"`
	Machines   []MachineState `json:"machines"`
	Missing    []Unobserved   `json:"unobserved,omitempty"`
	// Salts are the salted spec hashes the plan writes (SaltSpecs).
	Salts SpecSalts `json:"-"`
	// VolumesListed says every Machine's Held was listed (ObserveVolumes).
	VolumesListed bool `json:"volumes_listed,omitempty"`
	// VolumesUnlisted are the Machines that did not list their volumes.
	VolumesUnlisted []Unobserved `json:"volumes_unlisted,omitempty"`
	// Serving are the Serving Pointers' Containers by "namespace/service",
	// read only when a Machine is Down (ObserveServing); ServingUnread
	// says why they could not be.
	Serving       map[string][]rpc.ServingContainer `json:"-"`
	ServingUnread string                            `json:"-"`
}

// Complete reports whether every Machine the entry knows was observed.
func (s Snapshot) Complete() bool { return len(s.Missing) == 0 }

// MissingNames lists the unobserved Machines with their reasons.
func (s Snapshot) MissingNames() string { return unobservedNames(s.Missing) }

// Machine returns the state of the Machine with this id.
func (s Snapshot) Machine(id string) (MachineState, bool) {
	for _, m := range s.Machines {
		if m.ID == id {
			return m, true
		}
	}
	return MachineState{}, false
}

// Containers returns every observed Container in namespace ns ("" = all).
func (s Snapshot) Containers(ns string) []rpc.ContainerObservation {
	var out []rpc.ContainerObservation
	for _, m := range s.Machines {
		for _, c := range m.Containers {
			if ns == "" || c.Namespace == ns {
				out = append(out, c)
			}
		}
	}
	return out
}

// Observe takes a Snapshot: list_machines on the entry, then
// list_containers and list_images fanned out to every Machine. Per-target
// failures and omissions are recorded, not fatal; only a failed
// list_machines or fan-out call as a whole is an error.
func Observe(ctx context.Context, c Caller, ns string, withImages bool) (Snapshot, error) {
	var list rpc.MachineList
	if err := rpc.InvokeInto(ctx, c, rpc.Target{}, rpc.ListMachines, rpc.None{}, &list); err != nil {
		return Snapshot{}, fmt.Errorf("observe Machines: %w", err)
	}
	snap := Snapshot{ObservedAt: time.Now().UTC(), Observer: list.ObserverName}
	idx := map[string]int{}
	for _, m := range list.Machines {
		idx[m.ID] = len(snap.Machines)
		snap.Machines = append(snap.Machines, MachineState{ID: m.ID, Name: m.Name, Labels: m.Labels, Membership: m.Membership, Capabilities: m.Capabilities})
	}
	// One-off runs are observed too: a listing shows them, a plan leaves
	// them alone (placeService) unless their Service is gone (pruneRows).
	fr, err := rpc.FanoutMethod(ctx, c, rpc.Target{All: true}, rpc.ListContainers, rpc.ListContainersRequest{Namespace: ns, OneOffs: true})
	if err != nil {
		return Snapshot{}, fmt.Errorf("observe Containers: %w", err)
	}
	seen := map[string]bool{}
	for _, r := range fr.Results {
		i, ok := idx[r.MachineID]
		if !ok {
			i = len(snap.Machines)
			idx[r.MachineID] = i
			snap.Machines = append(snap.Machines, MachineState{ID: r.MachineID, Name: r.MachineName})
		}
		ms := &snap.Machines[i]
		if r.Error != nil {
			snap.Missing = append(snap.Missing, Unobserved{MachineID: r.MachineID, Name: ms.Name, Reason: r.Error.Error()})
			seen[r.MachineID] = true
			continue
		}
		cl, err := rpc.ListContainers.Answer(r.Payload)
		if err != nil {
			snap.Missing = append(snap.Missing, Unobserved{MachineID: r.MachineID, Name: ms.Name, Reason: "malformed list_containers answer: " + err.Error()})
			seen[r.MachineID] = true
			continue
		}
		ms.Observed, ms.Volumes, ms.Writers = true, cl.Volumes, cl.Writers
		if len(cl.Labels) > 0 {
			ms.Labels = cl.Labels
		}
		for _, co := range cl.Containers {
			if co.MachineID == "" {
				co.MachineID = ms.ID
			}
			fillFromLabels(&co)
			if ns == "" || co.Namespace == ns {
				ms.Containers = append(ms.Containers, co)
			}
		}
		seen[r.MachineID] = true
	}
	for _, o := range fr.Omitted {
		seen[o.MachineID] = true
		snap.Missing = append(snap.Missing, Unobserved{MachineID: o.MachineID, Name: o.MachineName, Reason: o.Reason})
	}
	for _, m := range snap.Machines {
		if !seen[m.ID] {
			snap.Missing = append(snap.Missing, Unobserved{MachineID: m.ID, Name: m.Name, Reason: "no answer in the fan-out"})
		}
	}
	if withImages {
		observeImages(ctx, c, &snap, idx)
	}
	sort.Slice(snap.Machines, func(i, j int) bool { return snap.Machines[i].Name < snap.Machines[j].Name })
	return snap, nil
}

func observeImages(ctx context.Context, c Caller, snap *Snapshot, idx map[string]int) {
	fr, err := rpc.FanoutMethod(ctx, c, rpc.Target{All: true}, rpc.ListImages, rpc.ListImagesRequest{})
	if err != nil {
		return // images stay unknown: the planner warns instead of refusing
	}
	for _, r := range fr.Results {
		i, ok := idx[r.MachineID]
		if !ok || r.Error != nil {
			continue
		}
		il, err := rpc.ListImages.Answer(r.Payload)
		if err != nil {
			continue
		}
		ms := &snap.Machines[i]
		ms.ImagesKnown = true
		for _, im := range il.Images {
			ms.Images = append(ms.Images, im.Tags...)
			ms.Images = append(ms.Images, im.ID)
		}
	}
}

// fillFromLabels completes an observation from its ployz labels when the
// daemon left the typed fields empty.
func fillFromLabels(c *rpc.ContainerObservation) {
	l := c.Labels
	if l == nil {
		return
	}
	set := func(f *string, key string) {
		if *f == "" {
			*f = l[key]
		}
	}
	set(&c.Namespace, rpc.LabelNamespace)
	set(&c.Service, rpc.LabelService)
	set(&c.ServiceID, rpc.LabelServiceID)
	set(&c.Deployment, rpc.LabelDeployment)
	set(&c.SpecHash, rpc.LabelSpecHash)
}

// kind is a Container's ployz.kind: service unless labelled (or specced)
// hook or run.
func kind(c rpc.ContainerObservation) string {
	for _, k := range []string{rpc.KindHook, rpc.KindRun} {
		if c.Labels[rpc.LabelKind] == k || c.Spec != nil && c.Spec.Kind == k {
			return k
		}
	}
	return rpc.KindService
}

// HasImage reports whether ref (with :latest implied) is among tags.
func HasImage(tags []string, ref string) bool {
	want := normalizeRef(ref)
	for _, t := range tags {
		if t == ref || normalizeRef(t) == want {
			return true
		}
	}
	return false
}

func normalizeRef(r string) string {
	r = strings.TrimPrefix(r, "docker.io/")
	r = strings.TrimPrefix(r, "library/")
	if strings.Contains(r, "@") {
		return r
	}
	if i := strings.LastIndex(r, ":"); i < 0 || strings.Contains(r[i:], "/") {
		r += ":latest"
	}
	return r
}
