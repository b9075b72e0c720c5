package rpc

// DNS providers (`ployz cert dns-provider`): the credentials the ingress
// answers ACME DNS-01 challenges with. The entry checks them, seals the
// secret settings with the Cluster key and writes a row of the
// certificates table ("dns-provider:" + name); secrets never come back.
const (
	CmdSetDNSProvider     = "set_dns_provider"
	CapSetDNSProvider     = "ployz.operator.set_dns_provider.v1"
	CmdListDNSProviders   = "list_dns_providers"
	CapListDNSProviders   = "ployz.operator.list_dns_providers.v1"
	CmdRemoveDNSProvider  = "remove_dns_provider"
	CapRemoveDNSProvider  = "ployz.operator.remove_dns_provider.v1"
	maxDNSProviderSetting = 4 << 10
)

// SetDNSProviderRequest adds or replaces the provider Name.
type SetDNSProviderRequest struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Zone     string            `json:"zone"`
	Settings map[string]string `json:"settings,omitempty"`
	Secrets  map[string]string `json:"secrets,omitempty"`
}

// DNSProviderView is a provider as operators see it: its secrets named,
// never shown.
type DNSProviderView struct {
	Name     string            `json:"name"`
	Provider string            `json:"provider"`
	Zone     string            `json:"zone"`
	Settings map[string]string `json:"settings,omitempty"`
	// Secrets names the secret settings held (sealed).
	Secrets []string `json:"secrets,omitempty"`
	AddedAt int64    `json:"added_at,omitempty"`
	// Error says why the row does not read as a provider (the ingress
	// skips it).
	Error string `json:"error,omitempty"`
}

// DNSProviderList answers list_dns_providers.
type DNSProviderList struct {
	Providers []DNSProviderView `json:"providers"`
}

// RemoveDNSProviderRequest names a provider.
type RemoveDNSProviderRequest struct {
	Name string `json:"name"`
}

// Validate refuses a missing name or oversized values, naming the field;
// the entry checks the rest (ingress.CheckDNSProvider).
func (r SetDNSProviderRequest) Validate() error {
	if r.Name == "" || len(r.Name) > 63 {
		return InvalidField("name", "%q: want a provider name of 1 to 63 characters", r.Name)
	}
	for _, m := range []map[string]string{r.Settings, r.Secrets} {
		for k, v := range m {
			if len(k) > 64 || len(v) > maxDNSProviderSetting {
				return InvalidField(k, "longer than %d bytes", maxDNSProviderSetting)
			}
		}
	}
	return nil
}

// Validate refuses an empty name.
func (r RemoveDNSProviderRequest) Validate() error {
	if r.Name == "" || len(r.Name) > 63 {
		return InvalidField("name", "%q: want a provider name", r.Name)
	}
	return nil
}
