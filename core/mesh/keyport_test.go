package mesh

import (
	"testing"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"
)

// TestKeyAndPortOnlyWhatDiffers: adopting or restoring a device sets the
// key and port only where the device lacks them. A listen port it already
// has is never set again, since wireguard-go rebinds its UDP socket on
// every set and loses the datagrams in flight (a handshake response: a
// 5 s gap in the mesh).
func TestKeyAndPortOnlyWhatDiffers(t *testing.T) {
	key, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	other, err := wgtypes.GeneratePrivateKey()
	if err != nil {
		t.Fatal(err)
	}
	m := &Mesh{cfg: Config{PrivateKey: key, ListenPort: 51820}}
	for _, c := range []struct {
		name      string
		dev       *wgtypes.Device
		key, port bool
	}{
		{"unread device", nil, true, true},
		{"configured", &wgtypes.Device{PrivateKey: key, ListenPort: 51820}, false, false},
		{"fresh process", &wgtypes.Device{}, true, true},
		{"other port", &wgtypes.Device{PrivateKey: key, ListenPort: 51821}, false, true},
		{"other key", &wgtypes.Device{PrivateKey: other, ListenPort: 51820}, true, false},
	} {
		cfg := m.keyAndPort(c.dev)
		if got := cfg.PrivateKey != nil; got != c.key {
			t.Errorf("%s: sets the key %v, want %v", c.name, got, c.key)
		} else if got && *cfg.PrivateKey != key {
			t.Errorf("%s: sets another key", c.name)
		}
		if got := cfg.ListenPort != nil; got != c.port {
			t.Errorf("%s: sets the port %v, want %v", c.name, got, c.port)
		} else if got && *cfg.ListenPort != 51820 {
			t.Errorf("%s: sets port %d", c.name, *cfg.ListenPort)
		}
	}
}
