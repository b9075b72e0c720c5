package packaging

import (
	"strings"
	"testing"
)

// TestPluginUnitKeepsDataPlaneSockets: the one unit every plugin runs under
// must keep what Internal DNS and the Ingress Proxy rely on to lose no
// query or connection across a restart, and verify the binary first.
func TestPluginUnitKeepsDataPlaneSockets(t *testing.T) {
	b, err := Files.ReadFile("systemd/ployz-plugin@.service")
	if err != nil {
		t.Fatal(err)
	}
	u := string(b)
	for _, want := range []string{
		"Type=notify\n", "NotifyAccess=main\n", "FileDescriptorStoreMax=16\n", "Restart=always\n",
		"RestartPreventExitStatus=78\n", "StartLimitIntervalSec=0\n",
		"ExecStartPre=/usr/local/bin/ployzd plugins verify --dir /var/lib/ployz/plugins %i\n",
		"ExecStart=/var/lib/ployz/plugins/bin/%i serve --socket /run/ployz/plugins/%i.sock\n",
	} {
		if !strings.Contains(u, want) {
			t.Errorf("ployz-plugin@.service lacks %q", strings.TrimSpace(want))
		}
	}
	for _, line := range strings.Split(u, "\n") {
		if strings.HasPrefix(line, "PartOf=") || strings.HasPrefix(line, "BindsTo=") {
			t.Errorf("ployz-plugin@.service has %q: a ployzd stop would stop the plugin", line)
		}
	}
}

// TestDaemonAndStoreUnitsKeepTheirPorts: ployzd (Machine RPC, the volume
// transport) and the store (gossip) keep their listening sockets in the
// fd store, so a restart never frees a port for another local user; that
// takes notifications from the main process and a store to keep them in.
func TestDaemonAndStoreUnitsKeepTheirPorts(t *testing.T) {
	for unit, max := range map[string]string{"ployz.service": "72", "ployz-store.service": "8"} {
		b, err := Files.ReadFile("systemd/" + unit)
		if err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{"NotifyAccess=main\n", "FileDescriptorStoreMax=" + max + "\n"} {
			if !strings.Contains(string(b), want) {
				t.Errorf("%s lacks %q", unit, strings.TrimSpace(want))
			}
		}
	}
}
