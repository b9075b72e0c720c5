package containers

import (
	"fmt"
	"maps"
	"path"
	"regexp"
	"slices"
	"strings"

	"github.com/docker/docker/api/types/container"
	dockerunits "github.com/docker/go-units"

	"github.com/ployz/ployz/core/rpc"
)

// Log options the local driver takes (Ployz always logs with it: the Log
// Store reads its files).
var localLogOptions = map[string]bool{"max-size": true, "max-file": true, "compress": true, "mode": true, "max-buffer-size": true}

var capRE = regexp.MustCompile(`^(ALL|(CAP_)?[A-Z][A-Z0-9_]*)$`)

// validateHost refuses a malformed spec.host, naming the field. Docker
// checks the values themselves (a capability or sysctl it does not know)
// when the Container is created.
func validateHost(h *rpc.HostSpec) error {
	if h == nil {
		return nil
	}
	for f, caps := range map[string][]string{"spec.host.cap_add": h.CapAdd, "spec.host.cap_drop": h.CapDrop} {
		for i, c := range caps {
			if !capRE.MatchString(c) {
				return rpc.InvalidField(fmt.Sprintf("%s[%d]", f, i), "%q is not a capability name (e.g. NET_ADMIN)", c)
			}
		}
	}
	for i, d := range h.Devices {
		f := fmt.Sprintf("spec.host.devices[%d]", i)
		if !path.IsAbs(d.Source) {
			return rpc.InvalidField(f+".source", "%q is not an absolute host path", d.Source)
		}
		if d.Target != "" && !path.IsAbs(d.Target) {
			return rpc.InvalidField(f+".target", "%q is not an absolute path", d.Target)
		}
		if strings.Trim(d.Permissions, "rwm") != "" {
			return rpc.InvalidField(f+".permissions", "%q is not made of r, w and m", d.Permissions)
		}
	}
	for i, g := range h.GPUs {
		if g.Count < -1 {
			return rpc.InvalidField(fmt.Sprintf("spec.host.device_requests[%d].count", i), "%d is not -1 (all) or a count", g.Count)
		}
	}
	for p := range h.Tmpfs {
		if !path.IsAbs(p) {
			return rpc.InvalidField("spec.host.tmpfs", "%q is not an absolute path", p)
		}
	}
	for name, u := range h.Ulimits {
		if name == "" || u.Soft < -1 || u.Hard < -1 || (u.Hard != -1 && u.Soft > u.Hard) {
			return rpc.InvalidField("spec.host.ulimits."+name, "soft %d, hard %d: want soft <= hard, each -1 (unlimited) or more", u.Soft, u.Hard)
		}
	}
	for k := range h.Sysctls {
		if k == "" || strings.ContainsAny(k, "= \x00") {
			return rpc.InvalidField("spec.host.sysctls", "%q is not a sysctl name", k)
		}
	}
	for i, e := range h.ExtraHosts {
		if host, ip, ok := strings.Cut(e, ":"); !ok || host == "" || ip == "" {
			return rpc.InvalidField(fmt.Sprintf("spec.host.extra_hosts[%d]", i), "%q is not host:ip", e)
		}
	}
	for f, v := range map[string]int64{"shm_size_bytes": h.ShmBytes, "memory_reservation_bytes": h.MemoryReservationBytes, "pids_limit": h.PidsLimit} {
		if v < 0 {
			return rpc.InvalidField("spec.host."+f, "%d is negative", v)
		}
	}
	if h.StopTimeoutSeconds != nil && *h.StopTimeoutSeconds < 0 {
		return rpc.InvalidField("spec.host.stop_timeout_seconds", "%d is negative", *h.StopTimeoutSeconds)
	}
	for k := range h.LogOptions {
		if !localLogOptions[k] {
			return rpc.InvalidField("spec.host.log_options."+k, "the local log driver does not take it (%s)", strings.Join(slices.Sorted(maps.Keys(localLogOptions)), ", "))
		}
	}
	return nil
}

// applyHost sets what spec.host declares on Docker's create request, as
// Docker Compose sets the same keys.
func applyHost(h *rpc.HostSpec, cfg *container.Config, host *container.HostConfig) {
	if h == nil {
		return
	}
	host.CapAdd, host.CapDrop = h.CapAdd, h.CapDrop
	host.Privileged, host.ReadonlyRootfs = h.Privileged, h.ReadOnly
	host.SecurityOpt = h.SecurityOpt
	if h.Init {
		t := true
		host.Init = &t
	}
	for _, d := range h.Devices {
		dm := container.DeviceMapping{PathOnHost: d.Source, PathInContainer: d.Target, CgroupPermissions: d.Permissions}
		if dm.PathInContainer == "" {
			dm.PathInContainer = d.Source
		}
		if dm.CgroupPermissions == "" {
			dm.CgroupPermissions = "rwm"
		}
		host.Devices = append(host.Devices, dm)
	}
	for _, g := range h.GPUs {
		dr := container.DeviceRequest{Driver: g.Driver, Count: g.Count, DeviceIDs: g.DeviceIDs, Options: g.Options}
		if len(g.Capabilities) > 0 {
			dr.Capabilities = [][]string{g.Capabilities}
		}
		host.DeviceRequests = append(host.DeviceRequests, dr)
	}
	if len(h.Tmpfs) > 0 {
		host.Tmpfs = h.Tmpfs
	}
	host.ShmSize = h.ShmBytes
	for _, name := range slices.Sorted(maps.Keys(h.Ulimits)) {
		u := h.Ulimits[name]
		host.Ulimits = append(host.Ulimits, &dockerunits.Ulimit{Name: name, Soft: u.Soft, Hard: u.Hard})
	}
	if len(h.Sysctls) > 0 {
		host.Sysctls = h.Sysctls
	}
	host.ExtraHosts = h.ExtraHosts
	cfg.StopSignal = h.StopSignal
	cfg.StopTimeout = h.StopTimeoutSeconds
	host.MemoryReservation = h.MemoryReservationBytes
	if h.PidsLimit > 0 {
		p := h.PidsLimit
		host.PidsLimit = &p
	}
	if len(h.LogOptions) > 0 {
		host.LogConfig.Config = h.LogOptions
	}
}
