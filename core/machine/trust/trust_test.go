package trust

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/core/meshaddr"
	"github.com/ployz/ployz/core/store/schema"
	"github.com/ployz/ployz/core/store/server"
	"github.com/ployz/ployz/sdk/store"
)

type edSigner struct{ k ed25519.PrivateKey }

func newSigner(t *testing.T) edSigner {
	t.Helper()
	_, k, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return edSigner{k}
}

func (s edSigner) PublicKey() string {
	return base64.StdEncoding.EncodeToString(s.k.Public().(ed25519.PublicKey))
}
func (s edSigner) Sign(msg []byte) []byte { return ed25519.Sign(s.k, msg) }

// member is one Machine of the test Cluster: its own store node, RPC key
// and pins.
type member struct {
	id     string
	signer edSigner
	wg     wgtypes.Key
	node   *server.Node
	client *store.Client
	v      *Verifier
}

func (m *member) body(endpoint string) store.MachineBody {
	return store.MachineBody{Name: m.id, PublicKey: m.wg.PublicKey().String(), Endpoints: []string{endpoint},
		Subnet: "10.210.1.0/24", ManagementIP: meshaddr.ManagementIP(m.wg.PublicKey()).String(),
		Phase: "participating", RPCKey: m.signer.PublicKey()}
}

func (m *member) publish(t *testing.T, endpoint string) store.MachineBody {
	t.Helper()
	b := m.body(endpoint)
	if err := m.v.SignOwn(m.signer, m.id, &b, time.Now()); err != nil {
		t.Fatal(err)
	}
	put(t, m.client, m.id, b)
	return b
}

func put(t *testing.T, c *store.Client, id string, b store.MachineBody) {
	t.Helper()
	if _, err := c.Machines().Put(context.Background(), store.Row[store.MachineBody]{Key: id, Owner: id, Body: b}); err != nil {
		t.Fatal(err)
	}
}

func putRaw(t *testing.T, c *store.Client, id, raw string) {
	t.Helper()
	if _, err := c.Exec(context.Background(), store.Stmt(`INSERT INTO machines (id, owner, body, updated_at) VALUES (?, ?, ?, 1)
		ON CONFLICT(id) DO UPDATE SET owner = excluded.owner, body = excluded.body`, id, id, raw)); err != nil {
		t.Fatal(err)
	}
}

func (m *member) check(t *testing.T) map[string]Verdict {
	t.Helper()
	rows, err := m.client.Machines().List(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]Verdict{}
	for _, vd := range m.v.Check(m.id, rows) {
		out[vd.Row.Key] = vd
	}
	return out
}

type cluster struct {
	t       *testing.T
	members []*member
}

// newCluster starts n real store nodes gossiping on loopback; member 0
// founds the Cluster, member i joins through member i-1.
func newCluster(t *testing.T, n int) *cluster {
	t.Helper()
	c := &cluster{t: t}
	dir := t.TempDir()
	key := make([]byte, 32)
	var boot []string
	for i := 0; i < n; i++ {
		node, err := server.Start(context.Background(), server.Config{
			DBPath: filepath.Join(dir, fmt.Sprint("m", i), "store.db"), SchemaSQL: schema.SQL(),
			APIAddr: "127.0.0.1:0", NoAuth: true, GossipAddr: "127.0.0.1:0", GossipKey: key,
			Bootstrap: boot, SyncInterval: 100 * time.Millisecond, Fast: true,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { node.Close() })
		boot = append(boot, node.GossipAddr())
		wg, err := wgtypes.GeneratePrivateKey()
		if err != nil {
			t.Fatal(err)
		}
		m := &member{id: fmt.Sprint("m", i+1), signer: newSigner(t), wg: wg, node: node, client: store.New(node.APIAddr())}
		if m.v, err = Open(filepath.Join(dir, fmt.Sprint("pins", i)), m.signer.PublicKey(), nil); err != nil {
			t.Fatal(err)
		}
		if i == 0 {
			if err := m.v.Replace(Pins{Strict: true}); err != nil {
				t.Fatal(err)
			}
		} else {
			c.enroll(c.members[i-1], m)
			// As join does: publish once the store holds the entry's row.
			waitRow(t, m.client, m.id)
		}
		m.publish(t, fmt.Sprintf("192.0.2.%d:51820", i+1))
		c.members = append(c.members, m)
	}
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		for _, o := range c.members {
			if vs[o.id].Status != Signed {
				return fmt.Errorf("%s sees %s as %s %s", m.id, o.id, vs[o.id].Status, vs[o.id].Reason)
			}
		}
		return nil
	})
	return c
}

// enroll is what publish_machine and join do: the entry signs the
// joiner's first row and hands it its pins and endorsement.
func (c *cluster) enroll(entry, joiner *member) {
	c.t.Helper()
	b := joiner.body("192.0.2.99:51820")
	b.Phase = "joining"
	if err := SignEnrollment(entry.signer, entry.id, joiner.id, &b, time.Now()); err != nil {
		c.t.Fatal(err)
	}
	put(c.t, entry.client, joiner.id, b)
	if err := joiner.v.Replace(entry.v.Export(entry.id, entry.wg.PublicKey().String())); err != nil {
		c.t.Fatal(err)
	}
	if err := joiner.v.SetSelfEndorsement(joiner.id, b.Endorsement); err != nil {
		c.t.Fatal(err)
	}
}

// waitAll waits until cond holds on every member's view.
func (c *cluster) waitAll(cond func(m *member, vs map[string]Verdict) error) {
	c.t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		var err error
		for _, m := range c.members {
			if err = cond(m, m.check(c.t)); err != nil {
				break
			}
		}
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			c.t.Fatal(err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// TestForgedRowsRefusedEverywhere: member m2 writes rows about m1 through
// its own store; once they replicate, every Machine refuses them and keeps
// acting on m1's genuine row.
func TestForgedRowsRefusedEverywhere(t *testing.T) {
	c := newCluster(t, 3)
	x, y := c.members[0], c.members[1]
	genuine := x.publish(t, "192.0.2.1:51820")
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if got := vs[x.id]; got.Status != Signed || got.Row.Body.SignedAt != genuine.SignedAt {
			return fmt.Errorf("%s: m1 not yet at its latest row", m.id)
		}
		return nil
	})
	older := genuine
	time.Sleep(2 * time.Millisecond)
	latest := x.publish(t, "192.0.2.1:51820")
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vs[x.id].Row.Body.SignedAt != latest.SignedAt {
			return fmt.Errorf("%s: m1 not yet at its latest row", m.id)
		}
		return nil
	})

	evilWG, _ := wgtypes.GeneratePrivateKey()
	forgeries := []struct {
		name, want string
		raw        func() string
	}{
		{"changed endpoint, original signature", "signature does not verify", func() string {
			b := latest
			b.Endpoints = []string{"203.0.113.66:51820"}
			return encode(t, b)
		}},
		{"changed endpoint, signed with the forger's key", "signature does not verify", func() string {
			b := latest
			b.Endpoints = []string{"203.0.113.66:51820"}
			b.SignedAt++
			mustSign(t, Sign(y.signer, x.id, x.id, &b))
			return encode(t, b)
		}},
		{"forger's rpc_key", "rpc_key changed", func() string {
			b := latest
			b.RPCKey, b.SignedAt = y.signer.PublicKey(), b.SignedAt+1
			mustSign(t, Sign(y.signer, x.id, x.id, &b))
			return encode(t, b)
		}},
		{"forger's WireGuard key and management address", "public_key changed", func() string {
			b := latest
			b.PublicKey = evilWG.PublicKey().String()
			b.ManagementIP = meshaddr.ManagementIP(evilWG.PublicKey()).String()
			b.SignedAt++
			mustSign(t, Sign(y.signer, x.id, x.id, &b))
			return encode(t, b)
		}},
		{"management address of another key", "management_ip", func() string {
			b := latest
			b.ManagementIP = meshaddr.ManagementIP(evilWG.PublicKey()).String()
			return encode(t, b)
		}},
		{"re-enrolled by the forger", "published its own row since", func() string {
			b := latest
			b.Endpoints = []string{"203.0.113.66:51820"}
			mustSign(t, SignEnrollment(y.signer, y.id, x.id, &b, time.Now()))
			return encode(t, b)
		}},
		{"replay of an older genuine row", "a replay", func() string { return encode(t, older) }},
		{"unsigned", "unsigned", func() string {
			b := latest
			b.Sig, b.Endpoints = "", []string{"203.0.113.66:51820"}
			return encode(t, b)
		}},
	}
	for _, f := range forgeries {
		raw := f.raw()
		putRaw(t, y.client, x.id, raw)
		c.waitAll(func(m *member, vs map[string]Verdict) error {
			vd := vs[x.id]
			if vd.Row.Raw != raw {
				return fmt.Errorf("%s: %s not replicated yet", m.id, f.name)
			}
			if vd.Status != Refused || !strings.Contains(vd.Reason, f.want) {
				return fmt.Errorf("%s: %s: status %s reason %q, want refused with %q", m.id, f.name, vd.Status, vd.Reason, f.want)
			}
			if vd.Use == nil || vd.Use.Body.SignedAt != latest.SignedAt || vd.Use.Body.PublicKey != latest.PublicKey ||
				vd.Use.Body.Endpoints[0] != "192.0.2.1:51820" || vd.Use.Body.RPCKey != latest.RPCKey {
				return fmt.Errorf("%s: %s: acting on %+v, want m1's genuine row", m.id, f.name, vd.Use)
			}
			return nil
		})
		t.Logf("%s: refused by all 3 Machines", f.name)
	}

	// A Machine nobody endorsed, invented by the forger, is refused too.
	ghost := &member{id: "ghost", signer: newSigner(t), wg: evilWG}
	gb := ghost.body("203.0.113.66:51820")
	gb.SignedAt = time.Now().UnixMilli()
	mustSign(t, Sign(ghost.signer, ghost.id, ghost.id, &gb))
	put(t, y.client, ghost.id, gb)
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vd, ok := vs["ghost"]; !ok || vd.Status != Refused || vd.Use != nil {
			return fmt.Errorf("%s: ghost is %+v, want refused with nothing to act on", m.id, vs["ghost"].Status)
		}
		return nil
	})

	// m1 writes its row again (the daemon does when it sees its own row
	// refused): accepted everywhere.
	healed := x.publish(t, "192.0.2.1:51820")
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vd := vs[x.id]; vd.Status != Signed || vd.Row.Body.SignedAt != healed.SignedAt {
			return fmt.Errorf("%s: m1's new row is %s %s", m.id, vd.Status, vd.Reason)
		}
		return nil
	})
}

// TestEndorsementChains: a Machine enrolled through m1 after m3 joined is
// trusted by m3, which never met it, through m1's endorsement; a key an
// untrusted Machine endorsed is not.
func TestEndorsementChains(t *testing.T) {
	c := newCluster(t, 3)
	wg, _ := wgtypes.GeneratePrivateKey()
	m4 := &member{id: "m4", signer: newSigner(t), wg: wg}
	b := m4.body("192.0.2.4:51820")
	mustSign(t, SignEnrollment(c.members[0].signer, "m1", "m4", &b, time.Now()))
	put(t, c.members[0].client, "m4", b)
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vs["m4"].Status != Enrolled {
			return fmt.Errorf("%s sees m4 as %q %s", m.id, vs["m4"].Status, vs["m4"].Reason)
		}
		return nil
	})
	// Its own row, endorsement carried along, is accepted as signed.
	b2 := m4.body("192.0.2.4:51820")
	b2.SignedAt, b2.Endorsement = time.Now().UnixMilli()+1, b.Endorsement
	mustSign(t, Sign(m4.signer, "m4", "m4", &b2))
	put(t, c.members[2].client, "m4", b2)
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vs["m4"].Status != Signed {
			return fmt.Errorf("%s sees m4 as %q %s", m.id, vs["m4"].Status, vs["m4"].Reason)
		}
		return nil
	})

	// An endorsement by a Machine nobody trusts.
	stranger := newSigner(t)
	m5 := &member{id: "m5", signer: newSigner(t), wg: wg}
	b5 := m5.body("192.0.2.5:51820")
	mustSign(t, SignEnrollment(stranger, "stranger", "m5", &b5, time.Now()))
	put(t, c.members[1].client, "m5", b5)
	c.waitAll(func(m *member, vs map[string]Verdict) error {
		if vd := vs["m5"]; vd.Status != Refused || !strings.Contains(vd.Reason, "does not trust") {
			return fmt.Errorf("%s sees m5 as %q %s", m.id, vd.Status, vd.Reason)
		}
		return nil
	})
}

// TestUpgradeFromUnsignedRows: a Machine upgraded from a version without
// signatures accepts unsigned rows until it has seen every row signed,
// then refuses them for good; a signed row never goes back to unsigned.
func TestUpgradeFromUnsignedRows(t *testing.T) {
	dir := t.TempDir()
	self := newSigner(t)
	other := newSigner(t)
	v, err := Open(filepath.Join(dir, PinsFile), self.PublicKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	wg1, _ := wgtypes.GeneratePrivateKey()
	wg2, _ := wgtypes.GeneratePrivateKey()
	row := func(id string, s edSigner, wg wgtypes.Key, sign bool, ep string) store.Row[store.MachineBody] {
		b := store.MachineBody{Name: id, PublicKey: wg.PublicKey().String(), RPCKey: s.PublicKey(), Endpoints: []string{ep},
			ManagementIP: meshaddr.ManagementIP(wg.PublicKey()).String()}
		if sign {
			b.SignedAt = time.Now().UnixMilli()
			mustSign(t, Sign(s, id, id, &b))
		}
		raw := encode(t, b)
		r, err := store.DecodeRow[store.MachineBody]("machines", []any{id, id, raw, int64(1)})
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	status := func(rows ...store.Row[store.MachineBody]) []Status {
		var out []Status
		for _, vd := range v.Check("a", rows) {
			out = append(out, vd.Status)
		}
		return out
	}
	if got := status(row("a", self, wg1, false, "192.0.2.1:1"), row("b", other, wg2, false, "192.0.2.2:1")); got[0] != Unsigned || got[1] != Unsigned {
		t.Fatalf("old rows: %v", got)
	}
	if got := status(row("a", self, wg1, true, "192.0.2.1:1"), row("b", other, wg2, false, "192.0.2.2:1")); got[0] != Signed || got[1] != Unsigned {
		t.Fatalf("a upgraded: %v", got)
	}
	if got := status(row("a", self, wg1, false, "192.0.2.1:1")); got[0] != Refused {
		t.Fatalf("a unsigned after signing: %v", got)
	}
	if got := status(row("b", other, wg1, false, "192.0.2.2:1")); got[0] != Refused {
		t.Fatalf("b unsigned with another WireGuard key: %v", got)
	}
	if v.Pins().Strict {
		t.Fatal("strict before every row was signed")
	}
	if got := status(row("a", self, wg1, true, "192.0.2.1:1"), row("b", other, wg2, true, "192.0.2.2:1")); got[0] != Signed || got[1] != Signed {
		t.Fatalf("all upgraded: %v", got)
	}
	c3 := newSigner(t)
	wg3, _ := wgtypes.GeneratePrivateKey()
	if got := status(row("c", c3, wg3, false, "192.0.2.3:1")); got[0] != Refused {
		t.Fatalf("an unsigned row after every row was signed: %v", got)
	}
	// The pins survive a restart.
	v2, err := Open(filepath.Join(dir, PinsFile), self.PublicKey(), nil)
	if err != nil {
		t.Fatal(err)
	}
	if p := v2.Pins(); !p.Strict || p.Machines["b"].RPCKey != other.PublicKey() || !p.Machines["b"].Signed {
		t.Fatalf("reloaded pins %+v", p)
	}
}

// TestRowMessageCoversNewerFields: a field this version does not know is
// covered by the signature, and a row with it still verifies.
func TestRowMessageCoversNewerFields(t *testing.T) {
	s := newSigner(t)
	raw := `{"name":"m1","rpc_key":"` + s.PublicKey() + `","added_later":{"b":1,"a":[2]}}`
	msg, err := RowMessage("m1", raw)
	if err != nil {
		t.Fatal(err)
	}
	sig := base64.StdEncoding.EncodeToString(s.Sign(msg))
	signed := strings.TrimSuffix(raw, "}") + `,"sig":"` + sig + `"}`
	again, err := RowMessage("m1", signed)
	if err != nil || string(again) != string(msg) {
		t.Fatalf("message changed by adding sig: %q vs %q (%v)", again, msg, err)
	}
	tampered := strings.Replace(signed, `"b":1`, `"b":2`, 1)
	m2, _ := RowMessage("m1", tampered)
	if k, _ := ParseKey(s.PublicKey()); verify(k, m2, sig) {
		t.Fatal("a change in an unknown field kept the signature valid")
	}
	if m3, _ := RowMessage("m2", signed); string(m3) == string(msg) {
		t.Fatal("the row id is not covered")
	}
	if _, err := RowMessage("m1", "[1]"); err == nil {
		t.Fatal("a non-object body was accepted")
	}
}

func encode(t *testing.T, b store.MachineBody) string {
	t.Helper()
	raw, err := json.Marshal(b)
	if err != nil {
		t.Fatal(err)
	}
	return string(raw)
}

func mustSign(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

func waitRow(t *testing.T, c *store.Client, id string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		if _, ok, _ := c.Machines().Get(context.Background(), id); ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("row %s never arrived", id)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// TestRowMessageFixture pins the signed bytes (docs/formats.md): sorted
// top-level keys, nested values as written, compacted, HTML characters
// escaped, sig left out.
func TestRowMessageFixture(t *testing.T) {
	raw := `{"z":1, "name":"a<b","sig":"x","a":{"k":2, "j":[1, 2]}}`
	got, err := RowMessage("m1", raw)
	if err != nil {
		t.Fatal(err)
	}
	want := "ployz machine row v1\x00m1\x00" + `{"a":{"k":2,"j":[1,2]},"name":"a\u003cb","z":1}`
	if string(got) != want {
		t.Fatalf("got  %q\nwant %q", got, want)
	}
	if got := string(EndorsementMessage("m2", "K", "W")); got != "ployz machine endorsement v1\x00m2\x00K\x00W" {
		t.Fatalf("endorsement message %q", got)
	}
}
