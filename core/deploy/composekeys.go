package deploy

import (
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/compose-spec/compose-go/v2/types"

	"github.com/ployz/ployz/core/rpc"
)

// How Ployz treats one compose key (docs/compose.md lists them all).
type keyStatus int

const (
	// keySupported: applied to the Container as Docker Compose applies it.
	keySupported keyStatus = iota
	// keyMapped: translated to the Ployz equivalent (placement, rollout).
	keyMapped
	// keyIgnored: accepted with a warning naming the Service, the key and why.
	keyIgnored
	// keyRefused: the deploy is refused; running without it would run
	// something other than what the file says.
	keyRefused
)

type keyRule struct {
	status keyStatus
	why    string // for ignored and refused keys
}

func ok() keyRule                { return keyRule{status: keySupported} }
func mapped() keyRule            { return keyRule{status: keyMapped} }
func ignored(why string) keyRule { return keyRule{status: keyIgnored, why: why} }
func refused(why string) keyRule { return keyRule{status: keyRefused, why: why} }

const (
	whyNetwork   = "every Service joins its namespace's network on each Machine; Services reach each other by name through internal DNS"
	whyNamespace = "a Service Container shares no namespace with the Machine or another Container"
	whyNotYet    = "not applied by Ployz yet"
)

// serviceKeys is every key of a compose service and what Ployz does
// with it.
var serviceKeys = map[string]keyRule{
	"image": ok(), "build": ok(), "command": ok(), "entrypoint": ok(), "environment": ok(), "env_file": ok(),
	"working_dir": ok(), "user": ok(), "ports": ok(), "volumes": ok(), "healthcheck": ok(), "restart": ok(),
	"labels": ok(), "depends_on": ok(), "stop_grace_period": ok(), "stop_signal": ok(), "mem_limit": ok(),
	"mem_reservation": ok(), "cpus": ok(), "pids_limit": ok(), "pull_policy": ok(), "configs": ok(), "secrets": ok(),
	"cap_add": ok(), "cap_drop": ok(), "devices": ok(), "gpus": ok(), "privileged": ok(), "tmpfs": ok(),
	"shm_size": ok(), "ulimits": ok(), "sysctls": ok(), "extra_hosts": ok(), "init": ok(), "read_only": ok(),
	"security_opt": ok(), "logging": ok(), "log_driver": ok(), "log_opt": ok(), "extends": ok(),
	"deploy": mapped(), "scale": mapped(),

	"container_name": ignored("Ployz names each Container <namespace>-<service>-<id>, since a Service may run several"),
	"hostname":       ignored(whyNotYet + "; the Container's hostname is its id"),
	"domainname":     ignored(whyNotYet),
	"networks":       mapped(),
	"links":          ignored(whyNetwork),
	"external_links": ignored(whyNetwork),
	"expose":         ignored("every port is reachable on the namespace's network; publish with ports or x-ports"),
	"dns":            ignored("Containers resolve through the Machine's internal DNS"),
	"dns_search":     ignored("Containers resolve through the Machine's internal DNS"),
	"dns_opt":        ignored("Containers resolve through the Machine's internal DNS"),
	"mac_address":    ignored(whyNetwork),
	"profiles":       ignored("every Service in the file is deployed"),
	"develop":        ignored("a development (docker compose watch) setting"),
	"attach":         ignored("Ployz never attaches to a Container's output; `ployz logs` reads it"),
	"tty":            ignored(whyNotYet),
	"stdin_open":     ignored(whyNotYet),
	"platform":       ignored("images are pulled or built for the Machine's own platform"),
	"annotations":    ignored(whyNotYet),
	"label_file":     ignored(whyNotYet),
	"group_add":      ignored(whyNotYet),
	"cpu_shares":     ignored(whyNotYet), "cpu_quota": ignored(whyNotYet), "cpu_period": ignored(whyNotYet),
	"cpuset": ignored(whyNotYet), "cpu_count": ignored(whyNotYet), "cpu_percent": ignored(whyNotYet),
	"cpu_rt_runtime": ignored(whyNotYet), "cpu_rt_period": ignored(whyNotYet),
	"memswap_limit": ignored(whyNotYet), "mem_swappiness": ignored(whyNotYet),
	"oom_kill_disable": ignored(whyNotYet), "oom_score_adj": ignored(whyNotYet),
	"blkio_config": ignored(whyNotYet), "device_cgroup_rules": ignored(whyNotYet), "storage_opt": ignored(whyNotYet),
	"cgroup_parent": ignored(whyNotYet), "credential_spec": ignored("a Windows setting"),
	"pull_refresh_after": ignored(whyNotYet), "post_start": ignored(whyNotYet), "pre_stop": ignored(whyNotYet),

	"network_mode":   refused(whyNetwork),
	"pid":            refused(whyNamespace),
	"ipc":            refused(whyNamespace),
	"uts":            refused(whyNamespace),
	"userns_mode":    refused(whyNamespace),
	"cgroup":         refused(whyNamespace),
	"volumes_from":   refused("Containers of different Services may run on different Machines; share a named or Provisioned Volume"),
	"runtime":        refused("Ployz runs Containers with the Machine's default runtime"),
	"isolation":      refused("a Windows setting"),
	"use_api_socket": refused("a Service Container never reaches the Machine's Docker"),
	"provider":       refused("a Service must be a Container"),
	"models":         refused("a Service must be a Container"),
}

// deployKeys are the keys under a service's deploy:.
var deployKeys = map[string]keyRule{
	"mode": mapped(), "replicas": mapped(), "resources": ok(), "placement": mapped(), "update_config": mapped(),
	"restart_policy":  ok(),
	"labels":          ignored("Swarm service labels, which Docker Compose ignores too; use labels"),
	"rollback_config": ignored("`ployz rollback` deploys an earlier revision with the Service's own update order"),
	"endpoint_mode":   ignored(whyNetwork),
}

// topKeys are the top-level keys of a compose file.
var topKeys = map[string]keyRule{
	"version": ok(), "name": ok(), "services": ok(), "volumes": ok(), "configs": ok(), "secrets": ok(),
	"networks": mapped(),
	"include":  refused("deploy one file; merge included files into it"),
	"models":   refused("a Service must be a Container"),
}

// checkKeys warns of, or refuses, every key the file uses that Ployz does
// not apply, each naming the Service and the key.
func checkKeys(raw map[string]any) ([]string, error) {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(raw)) {
		r, known := topKeys[k]
		switch {
		case strings.HasPrefix(k, "x-"):
		case !known:
			out = append(out, fmt.Sprintf("top-level key %q is unknown and ignored", k))
		case r.status == keyIgnored:
			out = append(out, fmt.Sprintf("top-level key %q is ignored: %s", k, r.why))
		case r.status == keyRefused:
			return nil, fmt.Errorf("top-level key %q is not supported: %s", k, r.why)
		}
	}
	svcs, _ := raw["services"].(map[string]any)
	for _, name := range slices.Sorted(maps.Keys(svcs)) {
		m, _ := svcs[name].(map[string]any)
		for _, k := range slices.Sorted(maps.Keys(m)) {
			w, err := checkKey(name, k, serviceKeys)
			if err != nil {
				return nil, err
			}
			out = append(out, w...)
			if dm, isMap := m[k].(map[string]any); k == "deploy" && isMap {
				for _, dk := range slices.Sorted(maps.Keys(dm)) {
					w, err := checkKey(name, "deploy."+dk, prefixed("deploy.", deployKeys))
					if err != nil {
						return nil, err
					}
					out = append(out, w...)
				}
			}
		}
	}
	return out, nil
}

func checkKey(svc, k string, rules map[string]keyRule) ([]string, error) {
	if strings.HasPrefix(k, "x-") || strings.Contains(k, ".x-") {
		return nil, nil
	}
	r, known := rules[k]
	switch {
	case !known:
		return []string{fmt.Sprintf("service %q: key %q is unknown and ignored", svc, k)}, nil
	case r.status == keyIgnored:
		return []string{fmt.Sprintf("service %q: key %q is ignored: %s", svc, k, r.why)}, nil
	case r.status == keyRefused:
		return nil, fmt.Errorf("service %q: %s: not supported: %s", svc, k, r.why)
	}
	return nil, nil
}

func prefixed(p string, rules map[string]keyRule) map[string]keyRule {
	out := make(map[string]keyRule, len(rules))
	for k, r := range rules {
		out[p+k] = r
	}
	return out
}

// hostKeys reads the keys Docker Compose applies to the create request
// beyond image, command, environment, ports and mounts into spec.Host.
func hostKeys(spec *rpc.ContainerSpec, s types.ServiceConfig) ([]string, error) {
	h := &rpc.HostSpec{CapAdd: s.CapAdd, CapDrop: s.CapDrop, Privileged: s.Privileged, ReadOnly: s.ReadOnly,
		SecurityOpt: s.SecurityOpt, StopSignal: s.StopSignal, PidsLimit: s.PidsLimit,
		ShmBytes: int64(s.ShmSize), MemoryReservationBytes: int64(s.MemReservation)}
	h.Init = s.Init != nil && *s.Init
	if s.StopGracePeriod != nil {
		secs := int(time.Duration(*s.StopGracePeriod).Seconds())
		h.StopTimeoutSeconds = &secs
	}
	for i, d := range s.Devices {
		if !strings.HasPrefix(d.Source, "/") {
			return nil, fmt.Errorf("devices[%d]: %q is not an absolute host path (CDI device names are not supported)", i, d.Source)
		}
		h.Devices = append(h.Devices, rpc.DeviceSpec{Source: d.Source, Target: d.Target, Permissions: d.Permissions})
	}
	for _, g := range s.Gpus {
		// Docker Compose asks for the gpu capability with every gpus: entry.
		h.GPUs = append(h.GPUs, deviceRequest(g, "gpu"))
	}
	for _, t := range s.Tmpfs {
		if h.Tmpfs == nil {
			h.Tmpfs = map[string]string{}
		}
		p, opts, _ := strings.Cut(t, ":")
		h.Tmpfs[p] = opts
	}
	for name, u := range s.Ulimits {
		if h.Ulimits == nil {
			h.Ulimits = map[string]rpc.Ulimit{}
		}
		l := rpc.Ulimit{Soft: int64(u.Soft), Hard: int64(u.Hard)}
		if u.Single != 0 {
			l = rpc.Ulimit{Soft: int64(u.Single), Hard: int64(u.Single)}
		}
		h.Ulimits[name] = l
	}
	if len(s.Sysctls) > 0 {
		h.Sysctls = map[string]string(s.Sysctls)
	}
	h.ExtraHosts = s.ExtraHosts.AsList(":")
	sort.Strings(h.ExtraHosts)
	if s.CPUS > 0 && spec.CPUs == 0 {
		spec.CPUs = float64(s.CPUS)
	}
	warns, err := applyResources(spec, h, s.Deploy)
	if err != nil {
		return nil, err
	}
	lw, err := logOptions(h, s)
	if err != nil {
		return nil, err
	}
	// A Service declaring none of these keeps a nil Host, so its spec
	// (and spec hash) is what it was before the field existed.
	if b, _ := json.Marshal(h); string(b) != "{}" {
		spec.Host = h
	}
	return append(warns, lw...), nil
}

func deviceRequest(d types.DeviceRequest, extraCap string) rpc.DeviceRequest {
	caps := append([]string(nil), d.Capabilities...)
	if extraCap != "" && !contains(caps, extraCap) {
		caps = append(caps, extraCap)
	}
	out := rpc.DeviceRequest{Driver: d.Driver, Count: int(d.Count), DeviceIDs: d.IDs, Capabilities: caps}
	if len(d.Options) > 0 {
		out.Options = map[string]string(d.Options)
	}
	return out
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// applyResources reads deploy.resources as Docker Compose does: limits
// set cpus, memory and pids; reservations set the memory soft limit and
// device requests (GPUs). A CPU reservation is a Swarm scheduling hint
// Docker Compose ignores too.
func applyResources(spec *rpc.ContainerSpec, h *rpc.HostSpec, d *types.DeployConfig) ([]string, error) {
	if d == nil {
		return nil, nil
	}
	var warns []string
	if l := d.Resources.Limits; l != nil {
		if l.Pids > 0 {
			h.PidsLimit = l.Pids
		}
		if len(l.Devices) > 0 {
			return nil, fmt.Errorf("deploy.resources.limits.devices: devices are reserved, not limited: use deploy.resources.reservations.devices")
		}
		if len(l.GenericResources) > 0 {
			warns = append(warns, "deploy.resources.limits.generic_resources")
		}
	}
	if r := d.Resources.Reservations; r != nil {
		if r.MemoryBytes > 0 {
			h.MemoryReservationBytes = int64(r.MemoryBytes)
		}
		if r.NanoCPUs > 0 {
			warns = append(warns, "deploy.resources.reservations.cpus")
		}
		if r.Pids > 0 {
			warns = append(warns, "deploy.resources.reservations.pids")
		}
		if len(r.GenericResources) > 0 {
			warns = append(warns, "deploy.resources.reservations.generic_resources")
		}
		for i, dev := range r.Devices {
			if len(dev.Capabilities) == 0 {
				return nil, fmt.Errorf("deploy.resources.reservations.devices[%d].capabilities: required (e.g. [gpu])", i)
			}
			if dev.Count != 0 && len(dev.IDs) > 0 {
				return nil, fmt.Errorf("deploy.resources.reservations.devices[%d]: count and device_ids exclude each other", i)
			}
			h.GPUs = append(h.GPUs, deviceRequest(dev, ""))
		}
	}
	for i, k := range warns {
		warns[i] = fmt.Sprintf("key %q is ignored: a Swarm scheduling setting Docker Compose ignores too", k)
	}
	return warns, nil
}

// logOptions reads logging (or the legacy log_driver/log_opt). Ployz logs
// every Container with Docker's local driver, which its Log Store reads:
// local and json-file (whose rotation options local shares) are taken,
// another driver is refused.
func logOptions(h *rpc.HostSpec, s types.ServiceConfig) ([]string, error) {
	driver, opts, field := s.LogDriver, s.LogOpt, "log_opt"
	if s.Logging != nil {
		driver, opts, field = s.Logging.Driver, s.Logging.Options, "logging.options"
	}
	switch driver {
	case "", "local", "json-file":
	default:
		key := "log_driver"
		if s.Logging != nil {
			key = "logging.driver"
		}
		return nil, fmt.Errorf("%s: %q: Ployz logs with Docker's local driver, which `ployz logs` and the Log Store read; use local or json-file, or remove it", key, driver)
	}
	var warns []string
	for _, k := range slices.Sorted(maps.Keys(opts)) {
		switch k {
		case "max-size", "max-file", "compress":
			if h.LogOptions == nil {
				h.LogOptions = map[string]string{}
			}
			h.LogOptions[k] = opts[k]
		default:
			warns = append(warns, fmt.Sprintf("key %q is ignored: the local log driver takes max-size, max-file and compress", field+"."+k))
		}
	}
	return warns, nil
}
