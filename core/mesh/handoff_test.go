package mesh

import "testing"

// TestPeerLines keeps what a UAPI set takes back per peer and drops the
// device's private key, port, counters and handshake times.
func TestPeerLines(t *testing.T) {
	get := "private_key=aa\nlisten_port=51820\n" +
		"public_key=bb\npreshared_key=00\nprotocol_version=1\nendpoint=10.0.0.2:51820\n" +
		"last_handshake_time_sec=1\nlast_handshake_time_nsec=2\ntx_bytes=3\nrx_bytes=4\n" +
		"persistent_keepalive_interval=25\nallowed_ip=10.210.2.0/24\nallowed_ip=fdcc::1/128\n" +
		"public_key=cc\nendpoint=[fd00::2]:51820\nallowed_ip=10.210.3.0/24\nerrno=0\n"
	want := "public_key=bb\npreshared_key=00\nendpoint=10.0.0.2:51820\n" +
		"persistent_keepalive_interval=25\nallowed_ip=10.210.2.0/24\nallowed_ip=fdcc::1/128\n" +
		"public_key=cc\nendpoint=[fd00::2]:51820\nallowed_ip=10.210.3.0/24\n"
	if got := peerLines(get); got != want {
		t.Fatalf("peerLines:\n%s\nwant:\n%s", got, want)
	}
	if got := peerLines(""); got != "" {
		t.Fatalf("peerLines of nothing = %q", got)
	}
}

// TestDeviceWhole names what a device lacks after its process restarted.
func TestDeviceWhole(t *testing.T) {
	before := Device{Index: 4, PublicKey: [32]byte{1}, Peers: 2, Addresses: 2}
	for _, c := range []struct {
		after Device
		want  string
	}{
		{Device{Index: 4, PublicKey: [32]byte{1}, Peers: 2, Addresses: 2}, ""},
		{Device{Index: 9, PublicKey: [32]byte{1}, Peers: 3, Addresses: 2}, ""},
		{Device{Index: 4, Peers: 2, Addresses: 2}, "key missing"},
		{Device{Index: 4, PublicKey: [32]byte{1}, Peers: 1, Addresses: 2}, "1 of 2 peers"},
		{Device{Index: 9, PublicKey: [32]byte{1}, Peers: 2}, "0 of 2 addresses"},
	} {
		if got := before.Whole(c.after); got != c.want {
			t.Errorf("Whole(%+v) = %q, want %q", c.after, got, c.want)
		}
	}
}
