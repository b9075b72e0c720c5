package pluginhost

// Health is a plugin's state as this host last observed it.
type Health string

const (
	// HealthStarting: the host has not finished its first attempt.
	HealthStarting Health = "starting"
	// HealthHealthy: answering health checks; its capabilities are published.
	HealthHealthy Health = "healthy"
	// HealthIdle: an on-demand plugin (Entry.OnDemand) not running; its
	// capabilities are advertised and the first call for one starts it.
	HealthIdle Health = "idle"
	// HealthDown: not answering; capabilities withdrawn; the host retries.
	HealthDown Health = "down"
	// HealthRefused: the host will not run it (tampered binary, no common
	// plugin-API version, handshake mismatch, wrong name) until the
	// manifest changes and the host restarts.
	HealthRefused Health = "refused"
	// HealthStopped: the host closed.
	HealthStopped Health = "stopped"
)

// PluginStatus is what the host knows about one plugin.
type PluginStatus struct {
	// Name is the manifest name.
	Name string `json:"name"`
	// Lifecycle is managed or long-lived.
	Lifecycle Lifecycle `json:"lifecycle"`
	// Health is the last observed state.
	Health Health `json:"health"`
	// Error says why the plugin is down or refused.
	Error string `json:"error,omitempty"`
	// SHA256 is the digest the manifest installed.
	SHA256 string `json:"sha256"`
	// RunningSHA256 is the digest of the running process's executable when
	// it differs from SHA256 (a long-lived plugin not yet restarted onto an
	// upgrade).
	RunningSHA256 string `json:"running_sha256,omitempty"`
	// SwitchError says why the running process could not be moved onto the
	// installed binary (it does not verify, or its handoff failed): waiting
	// will not make it switch; the running binary keeps serving.
	SwitchError string `json:"switch_error,omitempty"`
	// Kind, Version and APIVersions come from the plugin's Info.
	Kind        string   `json:"kind,omitempty"`
	Version     string   `json:"version,omitempty"`
	APIVersions []uint32 `json:"api_versions,omitempty"`
	// APIVersion is the negotiated plugin-API version.
	APIVersion uint32 `json:"api_version,omitempty"`
	// Capabilities are the names published in the catalog now.
	Capabilities []string `json:"capabilities"`
	// Description is the plugin's own one-line description from Info.
	Description string `json:"description,omitempty"`
	// Pid is the serving process (0 when none is connected yet).
	Pid int `json:"pid,omitempty"`
	// Socket is a long-lived plugin's socket path.
	Socket string `json:"socket,omitempty"`
	// Restarts counts how often this host saw the plugin die and reconnected.
	Restarts int `json:"restarts"`
	// Launched is true when this host started the current process.
	Launched bool `json:"launched"`
	// StoreEventsDropped is what the process's Info last reported: the
	// store subscription changes it dropped as duplicate or out of order,
	// by table (nil when none). Refreshed on each health tick.
	StoreEventsDropped map[string]int64 `json:"store_events_dropped,omitempty"`
	// RefusedContainerRows is what the process's Info last reported: the
	// ready containers rows its serving computation refused (forged or
	// stray addresses). Refreshed on each health tick.
	RefusedContainerRows int64 `json:"refused_container_rows,omitempty"`
}
