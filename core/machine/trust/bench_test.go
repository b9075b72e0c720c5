package trust

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"golang.zx2c4.com/wireguard/wgctrl/wgtypes"

	"github.com/ployz/ployz/sdk/store"
)

// BenchmarkCheck times one Check of a 50-Machine machines table, as the
// peer loop runs it every 2 s: "changed" when every row is new (each
// signature verified), "unchanged" when the rows are the ones already
// accepted (compared byte for byte, no signature work).
func BenchmarkCheck(b *testing.B) {
	const n = 50
	type m struct {
		id string
		s  edSigner
		wg wgtypes.Key
	}
	var ms []m
	for i := range n {
		_, k, _ := ed25519Key()
		wg, _ := wgtypes.GeneratePrivateKey()
		ms = append(ms, m{fmt.Sprint("m", i), edSigner{k}, wg})
	}
	rows := func(at int64) []store.Row[store.MachineBody] {
		var out []store.Row[store.MachineBody]
		for _, x := range ms {
			mb := &member{id: x.id, signer: x.s, wg: x.wg}
			body := mb.body("192.0.2.1:51820")
			body.SignedAt = at
			if err := Sign(x.s, x.id, x.id, &body); err != nil {
				b.Fatal(err)
			}
			r, err := store.DecodeRow[store.MachineBody]("machines", []any{x.id, x.id, encodeB(b, body), int64(1)})
			if err != nil {
				b.Fatal(err)
			}
			out = append(out, r)
		}
		return out
	}
	for _, mode := range []string{"changed", "unchanged"} {
		b.Run(mode, func(b *testing.B) {
			v, err := Open(filepath.Join(b.TempDir(), PinsFile), "", nil)
			if err != nil {
				b.Fatal(err)
			}
			fixed := rows(time.Now().UnixMilli())
			v.Check("self", fixed)
			var sets [][]store.Row[store.MachineBody]
			if mode == "changed" {
				for i := range b.N {
					sets = append(sets, rows(time.Now().UnixMilli()+int64(i)+1))
				}
			}
			b.ResetTimer()
			for i := range b.N {
				rs := fixed
				if mode == "changed" {
					rs = sets[i]
				}
				for _, vd := range v.Check("self", rs) {
					if vd.Status != Signed {
						b.Fatalf("%s: %s %s", vd.Row.Key, vd.Status, vd.Reason)
					}
				}
			}
		})
	}
}

func ed25519Key() (ed25519.PublicKey, ed25519.PrivateKey, error) {
	return ed25519.GenerateKey(rand.Reader)
}

func encodeB(b *testing.B, body store.MachineBody) string {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	return string(raw)
}
