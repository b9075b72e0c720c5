package footprint

import (
	"fmt"
	"strings"

	"github.com/ployz/ployz/core/enroll"
)

// Kind groups items for people: unit, package, docker, volume, chain,
// link or path.
type Kind string

// The kinds, in the order an uninstall removes them.
const (
	KindUnit    Kind = "unit"
	KindPackage Kind = "package"
	KindDocker  Kind = "docker"
	KindVolume  Kind = "volume"
	KindChain   Kind = "chain"
	KindLink    Kind = "link"
	KindPath    Kind = "path"
)

// Item is one thing Ployz may have put on a host. Probe is a shell
// snippet that prints what of the item is present (one per line) and
// nothing when it is absent; Remove takes it away. Removal is judged by
// probing again, never by Remove's exit status alone.
type Item struct {
	Kind   Kind   `json:"kind"`
	Name   string `json:"name"`
	Probe  string `json:"-"`
	Remove string `json:"-"`
	// UserData items (volumes) are kept unless the uninstall purges them.
	UserData bool `json:"user_data,omitempty"`
}

// Names Ployz uses on a host. They mirror the defaults in core/mesh,
// core/mesh/dockernet and core/daemon; footprint_test.go pins them to
// those constants.
const (
	MeshLink      = "ployz-wg"
	ProbeLink     = "ployz-wgprobe"
	BridgeLink    = "ployz-br"
	ChainPrefix   = "PLOYZ"
	ManagedLabel  = "dev.ployz.managed"
	NamespaceLbl  = "ployz.namespace"
	Package       = "ployz"
	BinDir        = "/usr/local/bin"
	UnitDir       = "/etc/systemd/system"
	PackageUnits  = "/lib/systemd/system"
	DataDir       = "/var/lib/ployz"
	ConfigDir     = "/etc/ployz"
	RunDir        = "/run/ployz"
	NotifyDir     = "/run/ployz-notify"
	WireGuardSock = "/var/run/wireguard/ployz-wg.sock"
	DefaultEnv    = "/etc/default/ployz"
	// DockerDropIn restores namespace isolation before dockerd at boot.
	DockerDropIn = "docker.service.d/ployz-isolation.conf"
)

// chain is one iptables chain Ployz adds, the chains that jump to it and
// the families it lives in.
type chain struct {
	table, name string
	parents     []string
	v6          bool
}

// chains are dockernet's: the input filter (both families), the mesh ↔
// bridge forwarding and the namespace isolation it jumps to, the raw exemption from Docker 28's direct-routing
// drops, and the nat exemption of earlier builds.
var chains = []chain{
	{"filter", ChainPrefix + "-INPUT", []string{"INPUT"}, true},
	{"filter", ChainPrefix + "-FORWARD", []string{"DOCKER-USER", "FORWARD"}, false},
	{"filter", ChainPrefix + "-ISOLATE", []string{ChainPrefix + "-FORWARD"}, false},
	{"raw", ChainPrefix + "-PREROUTING", []string{"PREROUTING"}, false},
	{"nat", ChainPrefix + "-POSTROUTING", []string{"POSTROUTING"}, false},
}

// Items is the footprint, in removal order: units stop first (nothing
// recreates what follows), Containers go before their network, the
// network before its bridge, files last.
func Items() []Item {
	items := []Item{unitsItem(), packageItem(), containersItem(), networkItem(), volumesItem()}
	for _, c := range chains {
		items = append(items, c.item())
	}
	items = append(items, namespaceChainsItem()) // unreferenced once -ISOLATE went
	for _, l := range []string{MeshLink, ProbeLink, BridgeLink} {
		items = append(items, linkItem(l))
	}
	items = append(items, unitFilesItem())
	for _, b := range enroll.Binaries {
		items = append(items, pathItem(BinDir+"/"+b))
	}
	for _, p := range []string{DataDir, ConfigDir, RunDir, NotifyDir, WireGuardSock, DefaultEnv} {
		items = append(items, pathItem(p))
	}
	return items
}

// unitsItem is every ployz* unit that is running or failed: the daemon,
// store, userspace WireGuard, each plugin instance and a transient
// upgrade.
func unitsItem() Item {
	return Item{Kind: KindUnit, Name: "ployz* units",
		Probe: `systemctl list-units --all --plain --no-legend --state=active,activating,deactivating,reloading,failed 'ployz*' 2>/dev/null | ` +
			`awk '{print ($1 ~ /^ployz/) ? $1 : $2}' || true`,
		Remove: `systemctl disable --quiet ployz.service ployz-store.service ployz-wireguard.service 2>/dev/null; ` +
			`systemctl stop 'ployz*'; systemctl reset-failed 'ployz*' 2>/dev/null; true`}
}

// packageItem is the .deb install, which owns its binaries and units:
// dpkg removes those, so files and dpkg never disagree.
func packageItem() Item {
	return Item{Kind: KindPackage, Name: Package,
		Probe:  fmt.Sprintf(`dpkg-query -W -f='${Status}\n' %s 2>/dev/null | grep -q 'install ok' && echo %s || true`, Package, Package),
		Remove: "dpkg --purge " + Package}
}

// docker runs a docker listing only where Docker is installed.
func docker(list string) string {
	return "command -v docker >/dev/null 2>&1 && docker " + list + " 2>/dev/null || true"
}

func containersItem() Item {
	list := "ps -aq --filter label=" + NamespaceLbl
	return Item{Kind: KindDocker, Name: "Service Containers (label " + NamespaceLbl + ")",
		Probe: docker(list), Remove: "docker rm -f $(docker " + list + ")"}
}

// networkItem is the `ployz` bridge network. Containers someone attached
// by hand are disconnected first: the network is Ployz's, they are not.
func networkItem() Item {
	list := "network ls -q --filter label=" + ManagedLabel
	return Item{Kind: KindDocker, Name: "network (label " + ManagedLabel + ")",
		Probe: docker(list),
		Remove: "for n in $(docker " + list + "); do " +
			"for c in $(docker network inspect -f '{{range $k, $v := .Containers}}{{$k}} {{end}}' $n); do docker network disconnect -f $n $c; done; " +
			"docker network rm $n; done"}
}

func volumesItem() Item {
	list := "volume ls -q --filter label=" + NamespaceLbl
	return Item{Kind: KindVolume, Name: "volumes (label " + NamespaceLbl + ")", UserData: true,
		Probe: docker(list), Remove: "docker volume rm $(docker " + list + ")"}
}

// xtBins are the iptables binaries that may hold a chain: both backends
// (Ployz uses the one Docker uses, which may have changed since) and the
// plain name where no variant is installed.
func xtBins(v6 bool) []string {
	fam := []string{"iptables"}
	if v6 {
		fam = append(fam, "ip6tables")
	}
	var out []string
	for _, f := range fam {
		out = append(out, f+"-nft", f+"-legacy", f)
	}
	return out
}

// item probes every binary for the chain and, to remove it, deletes each
// jump to it, then flushes and deletes it.
func (c chain) item() Item {
	bins := strings.Join(xtBins(c.v6), " ")
	probe := fmt.Sprintf(`for x in %s; do command -v $x >/dev/null 2>&1 && $x -w 5 -t %s -S %s >/dev/null 2>&1 && echo "$x %s %s"; done; true`,
		bins, c.table, c.name, c.table, c.name)
	var jumps []string
	for _, p := range c.parents {
		jumps = append(jumps, fmt.Sprintf(`while $x -w 5 -t %s -D %s -j %s 2>/dev/null; do :; done`, c.table, p, c.name))
	}
	remove := fmt.Sprintf(`for x in %s; do command -v $x >/dev/null 2>&1 && $x -w 5 -t %s -S %s >/dev/null 2>&1 || continue; %s; $x -w 5 -t %s -F %s && $x -w 5 -t %s -X %s; done`,
		bins, c.table, c.name, strings.Join(jumps, "; "), c.table, c.name, c.table, c.name)
	return Item{Kind: KindChain, Name: c.table + " " + c.name, Probe: probe, Remove: remove}
}

// NamespaceChains starts the name of each namespace's isolation chain
// (one per namespace, named by a hash of it).
const NamespaceChains = ChainPrefix + "-NS-"

// namespaceChainsItem is every namespace chain in the filter table of
// either backend: found by listing, flushed and deleted.
func namespaceChainsItem() Item {
	bins := strings.Join(xtBins(false), " ")
	list := `$x -w 5 -t filter -S 2>/dev/null | awk '$1 == "-N" && index($2, "` + NamespaceChains + `") == 1 {print $2}'`
	probe := fmt.Sprintf(`for x in %s; do command -v $x >/dev/null 2>&1 || continue; for c in $(%s); do echo "$x filter $c"; done; done; true`, bins, list)
	remove := fmt.Sprintf(`for x in %s; do command -v $x >/dev/null 2>&1 || continue; for c in $(%s); do $x -w 5 -t filter -F $c && $x -w 5 -t filter -X $c; done; done`, bins, list)
	return Item{Kind: KindChain, Name: "filter " + NamespaceChains + "*", Probe: probe, Remove: remove}
}

func linkItem(name string) Item {
	return Item{Kind: KindLink, Name: name,
		Probe:  fmt.Sprintf(`ip link show %s >/dev/null 2>&1 && echo %s || true`, name, name),
		Remove: "ip link del " + name}
}

// unitFilesItem is the unit files machine init writes and their enable
// links; a .deb's are its package's (packageItem).
func unitFilesItem() Item {
	glob := UnitDir + "/ployz*.service " + UnitDir + "/*.wants/ployz*.service " + PackageUnits + "/ployz*.service " + UnitDir + "/" + DockerDropIn
	return Item{Kind: KindPath, Name: UnitDir + "/ployz*.service",
		Probe:  "ls -d " + glob + " 2>/dev/null || true",
		Remove: "rm -f " + glob + " && systemctl daemon-reload"}
}

func pathItem(p string) Item {
	return Item{Kind: KindPath, Name: p,
		Probe:  fmt.Sprintf(`test -e %s -o -L %s && echo %s || true`, p, p, p),
		Remove: "rm -rf " + p}
}
