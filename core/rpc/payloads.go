package rpc

import (
	"encoding/json"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/machine/trust"
	"github.com/ployz/ployz/sdk/store"
)

// The payloads of the Machine commands. They are part of the Stable
// promise: fields are only added, optional with defaults, and readers
// ignore fields they do not know. fixtures_test.go pins their shape.

// Inspection is the inspect command's payload: this Machine as it sees itself.
type Inspection struct {
	ID            string            `json:"id"`
	Name          string            `json:"name,omitempty"`
	Hostname      string            `json:"hostname,omitempty"`
	Phase         machine.Phase     `json:"phase"`
	PublicKey     string            `json:"public_key"`
	RPCKey        string            `json:"rpc_key,omitempty"`
	ManagementIP  string            `json:"management_ip"`
	Subnet        string            `json:"subnet,omitempty"`
	Network       string            `json:"network,omitempty"`
	Endpoints     []string          `json:"endpoints"`
	Labels        map[string]string `json:"labels,omitempty"`
	StoreVersions map[string]int64  `json:"store_versions,omitempty"`
	DaemonVersion string            `json:"daemon_version"`
	// OS and Arch are what the daemon was built for (GOOS, GOARCH): the
	// bundle an upgrade from a channel fetches. Absent from older daemons.
	OS              string       `json:"os,omitempty"`
	Arch            string       `json:"arch,omitempty"`
	Capabilities    []string     `json:"capabilities"`
	ClusterMachines int          `json:"cluster_machines,omitempty"`
	Plugins         []PluginView `json:"plugins,omitempty"`
	// StoreEventsDropped counts, by table, the store subscription changes
	// this daemon dropped since it started because the store repeated or
	// reordered them (absent when none, and from older daemons): above
	// zero, the store server misbehaves.
	StoreEventsDropped map[string]int64 `json:"store_events_dropped,omitempty"`
	// Isolation is the namespace isolation this Machine's kernel enforces
	// (absent from older daemons, which isolate nothing).
	Isolation *IsolationView `json:"isolation,omitempty"`
}

// IsolationView is the membership a Machine's isolation rules enforce.
type IsolationView struct {
	// Generation counts the rule sets committed since the daemon started
	// (0: none yet; the kernel holds what the last run restored).
	Generation int64 `json:"generation"`
	// ChangedAt is when the rules last changed (RFC 3339, UTC).
	ChangedAt string `json:"changed_at,omitempty"`
	// Networks counts the isolation networks (each namespace's own, its
	// compose networks, the external ones), Addresses the Containers.
	Networks  int `json:"networks"`
	Addresses int `json:"addresses"`
	// Error is why the last change could not be committed (the rules of
	// the generation before still hold).
	Error string `json:"error,omitempty"`
}

// PluginView is one installed plugin as this Machine's plugin host sees it.
type PluginView struct {
	Name          string   `json:"name"`
	Kind          string   `json:"kind,omitempty"`
	Version       string   `json:"version,omitempty"`
	APIVersion    uint32   `json:"api_version,omitempty"`
	Lifecycle     string   `json:"lifecycle"`
	Health        string   `json:"health"`
	Error         string   `json:"error,omitempty"`
	Capabilities  []string `json:"capabilities"`
	SHA256        string   `json:"sha256"`
	RunningSHA256 string   `json:"running_sha256,omitempty"`
	SwitchError   string   `json:"switch_error,omitempty"` // additive: the running binary could not be switched
	Pid           int      `json:"pid,omitempty"`
	Restarts      int      `json:"restarts"`
	// StoreEventsDropped is the plugin process's own count of store
	// subscription changes dropped as duplicate or out of order, by table
	// (absent when none, for a plugin reading no store, and from older
	// daemons and plugins).
	StoreEventsDropped map[string]int64 `json:"store_events_dropped,omitempty"`
	// RefusedContainerRows counts the ready containers rows the plugin's
	// last serving computation refused because their owner cannot vouch
	// for the address (forged or stray; absent when none, and from older
	// daemons and plugins).
	RefusedContainerRows int64 `json:"refused_container_rows,omitempty"`
}

// InitializeRequest founds a Cluster on this Machine.
type InitializeRequest struct {
	Name      string            `json:"name"`
	Network   string            `json:"network"`
	Subnet    string            `json:"subnet"`
	Endpoints []string          `json:"endpoints,omitempty"`
	Labels    map[string]string `json:"labels,omitempty"`
}

// PublishMachineRequest asks an entry to write a joiner's machines row,
// so existing Machines add it as a mesh peer before it can gossip itself.
type PublishMachineRequest struct {
	ID        string   `json:"id"`
	Name      string   `json:"name"`
	PublicKey string   `json:"public_key"`
	Subnet    string   `json:"subnet"`
	Endpoints []string `json:"endpoints"`
	// RPCKey is the joiner's rpc_key, published with its row so the
	// Cluster can call it before it gossips its own row.
	RPCKey string `json:"rpc_key,omitempty"`
}

// MachinePublished is publish_machine's answer: what the joiner needs
// from the entry to join (JoinRequest).
type MachinePublished struct {
	StoreVersions map[string]int64 `json:"store_versions"`
	ClusterSecret string           `json:"cluster_secret"`
	// TrustedMachines are the entry's pins, the joiner's starting ones,
	// and Endorsement its endorsement of the joiner's keys (nil without
	// an rpc_key); both absent from an entry without trust pins.
	TrustedMachines *trust.Pins        `json:"trusted_machines,omitempty"`
	Endorsement     *store.Endorsement `json:"endorsement,omitempty"`
}

// MarshalJSON writes what the untyped answer wrote: with trust pins, an
// endorsement key even when it is null; without, neither key.
func (p MachinePublished) MarshalJSON() ([]byte, error) {
	out := map[string]any{"store_versions": p.StoreVersions, "cluster_secret": p.ClusterSecret}
	if p.TrustedMachines != nil {
		out["trusted_machines"], out["endorsement"] = p.TrustedMachines, p.Endorsement
	}
	return json.Marshal(out)
}

// JoinRequest makes this Machine join a Cluster.
type JoinRequest struct {
	Name           string            `json:"name"`
	Network        string            `json:"network"`
	Subnet         string            `json:"subnet"`
	Endpoints      []string          `json:"endpoints,omitempty"`
	Labels         map[string]string `json:"labels,omitempty"`
	Peers          []machine.Peer    `json:"peers"`
	TargetVersions map[string]int64  `json:"target_versions"`
	// ClusterSecret (hex) keys the store's gossip; the entry Machine hands
	// it out in publish_machine's answer.
	ClusterSecret string `json:"cluster_secret,omitempty"`
	// TrustedMachines are the entry's pins (the keys it trusts), the
	// joiner's starting point for verifying machines rows; Endorsement is
	// the entry's signature over the joiner's own keys. Both come back
	// in publish_machine's answer; absent from an older entry.
	TrustedMachines *trust.Pins        `json:"trusted_machines,omitempty"`
	Endorsement     *store.Endorsement `json:"endorsement,omitempty"`
	// WaitSeconds bounds how long join waits to participate (default 60).
	WaitSeconds int `json:"wait_seconds,omitempty"`
}

// MachineView is one Machine in list_machines: its row as this Machine
// observes it, plus this observer's membership view of it.
type MachineView struct {
	ID           string            `json:"id"`
	Name         string            `json:"name"`
	Phase        string            `json:"phase,omitempty"`
	Subnet       string            `json:"subnet,omitempty"`
	ManagementIP string            `json:"management_ip,omitempty"`
	PublicKey    string            `json:"public_key,omitempty"`
	Endpoints    []string          `json:"endpoints,omitempty"`
	Labels       map[string]string `json:"labels,omitempty"`
	Version      string            `json:"version,omitempty"`
	Capabilities []string          `json:"capabilities,omitempty"`
	// Membership is up, suspect, down or unknown as seen from the observer;
	// "self" for the observer itself.
	Membership string  `json:"membership"`
	RTTMillis  float64 `json:"rtt_ms,omitempty"`
	UpdatedAt  int64   `json:"updated_at"`
	// Trust is the row's standing with the observer (signed, enrolled,
	// unsigned or refused; core/machine/trust) and TrustReason why it
	// was refused. Empty from an observer that does not verify rows.
	Trust       string `json:"trust,omitempty"`
	TrustReason string `json:"trust_reason,omitempty"`
}

// MachineList is list_machines' payload: one Machine's observation.
type MachineList struct {
	ObserverID   string        `json:"observer_id"`
	ObserverName string        `json:"observer_name"`
	ObservedAt   time.Time     `json:"observed_at"`
	Machines     []MachineView `json:"machines"`
}

// UpdateMachineRequest changes this Machine's own name or labels.
type UpdateMachineRequest struct {
	Name         *string           `json:"name,omitempty"`
	LabelsAdd    map[string]string `json:"labels_add,omitempty"`
	LabelsRemove []string          `json:"labels_remove,omitempty"`
}

// ForgetMachineRequest removes another Machine's rows from the store.
type ForgetMachineRequest struct {
	ID string `json:"id"`
}

// MachineForgotten is forget_machine's answer: the forgotten Machine's id.
type MachineForgotten struct {
	Forgotten string `json:"forgotten"`
}

// Member is one store member as the observing Machine's store sees it.
type Member struct {
	ID          string  `json:"id"` // the member's store site id
	MachineID   string  `json:"machine_id,omitempty"`
	MachineName string  `json:"machine_name,omitempty"`
	Addr        string  `json:"addr"`
	State       string  `json:"state"` // up, suspect, down
	RTTMillis   float64 `json:"rtt_ms"`
}

// Membership is the membership command's payload.
type Membership struct {
	ObserverID string   `json:"observer_id"`
	Members    []Member `json:"members"`
}
