package release

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/ployz/ployz/core/rpc"
)

func TestOverSSH(t *testing.T) {
	vs := views()
	vs[0].Capabilities = []string{rpc.CapInspect} // m3: an older release
	vs[1].Capabilities = []string{rpc.CapInspect} // m1 too, but no SSH URL for it
	plan, err := Plan(vs, &Manifest{Version: "1.1"}, nil, true)
	if err != nil {
		t.Fatal(err)
	}
	OverSSH(plan, map[string]string{"c3": "ssh://root@m3", "b2": "ssh://root@m2"})
	got := []string{}
	for _, a := range plan {
		got = append(got, a.Name+":"+a.Do)
	}
	if strings.Join(got, " ") != "m1:refuse m2:upgrade m3:ssh" || plan[2].SSH != "ssh://root@m3" {
		t.Fatalf("plan %v %+v", got, plan)
	}
	if plan[0].Missing != rpc.CapUpgradeMachine {
		t.Fatalf("refusal does not name the capability: %+v", plan[0])
	}
}

// TestPushSSHCommands: the bundle and its proof go over stdin, the
// bundle's own ployzd stages it with its digest and proof, the swap starts in a transient unit, and
// AwaitSSH follows the status file to its end.
func TestPushSSHCommands(t *testing.T) {
	b := bundle(t, Manifest{Version: "1.1", ProtocolMajor: 1, OS: "linux", Arch: "amd64"})
	p := t.TempDir() + "/b.tar.gz"
	if err := writeFile(p, b); err != nil {
		t.Fatal(err)
	}
	sum, _, _ := Digest(p)
	var cmds []string
	var uploaded, proof []byte
	polls := 0
	var id string
	sh := func(_ context.Context, cmd string, stdin io.Reader) (string, error) {
		cmds = append(cmds, cmd)
		if stdin != nil && strings.HasSuffix(cmd, ".proof") {
			proof, _ = io.ReadAll(stdin)
		} else if stdin != nil {
			uploaded, _ = io.ReadAll(stdin)
		}
		if strings.HasPrefix(cmd, "cat /var/lib/ployz/releases/upgrade.json") {
			polls++
			st := rpc.UpgradeStatus{ID: id, From: "1.0", To: "1.1", State: rpc.UpgradeRunning,
				Steps: []rpc.UpgradeStep{{Name: "switch", Outcome: "ok"}}}
			if polls > 1 {
				st.State = rpc.UpgradeDone
				st.Steps = append(st.Steps, rpc.UpgradeStep{Name: "store", Outcome: "ok"})
			}
			j, _ := json.Marshal(st)
			return string(j), nil
		}
		return "", nil
	}
	var err error
	signed := Bundle{Path: p, Manifest: &Manifest{Version: "1.1"}, Proof: &rpc.BundleProof{Signature: []byte(`{"signatures":[]}`)}}
	id, err = PushSSH(context.Background(), sh, signed, "1.0")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(uploaded, b) || len(cmds) != 4 {
		t.Fatalf("%d commands, uploaded %d of %d bytes", len(cmds), len(uploaded), len(b))
	}
	var got rpc.BundleProof
	if err := json.Unmarshal(proof, &got); err != nil || string(got.Signature) != string(signed.Proof.Signature) {
		t.Fatalf("proof uploaded %q: %v", proof, err)
	}
	if !strings.Contains(cmds[2], `"$d/bin/ployzd" upgrade stage`) || !strings.Contains(cmds[2], "--sha256 "+sum) || !strings.Contains(cmds[2], `p="--proof `) {
		t.Fatalf("stage command: %s", cmds[2])
	}
	if !strings.Contains(cmds[3], "systemd-run --unit ployz-upgrade-"+id) || !strings.Contains(cmds[3], "/var/lib/ployz/releases/1.1/bin/ployzd upgrade apply --id "+id+" --from 1.0 --to 1.1") {
		t.Fatalf("start command: %s", cmds[3])
	}
	var steps []string
	st, err := AwaitSSH(context.Background(), sh, id, time.Minute, func(s rpc.UpgradeStep) { steps = append(steps, s.Name) })
	if err != nil || st.State != rpc.UpgradeDone || strings.Join(steps, ",") != "switch,store" {
		t.Fatalf("await: %+v %v steps %v", st, err, steps)
	}
	if _, err := PushSSH(context.Background(), sh, signed, "1.0; rm -rf /"); err == nil {
		t.Fatal("a running version that is no version was put in a command")
	}
}
