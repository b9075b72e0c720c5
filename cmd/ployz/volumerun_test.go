package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/ployz/ployz/core/operator"
	"github.com/ployz/ployz/core/volumerun"
)

// TestPrintRun: a run's end is its state line on stdout, or with --json
// the run's document; nothing to do is its message (--json: run null,
// the Machine and the message); a refusal before a run prints nothing.
func TestPrintRun(t *testing.T) {
	run := &operator.VolumeRun{Volume: "db", Gen: 2, Kind: "move", State: operator.RunUndone, Error: "squatter mounts db"}
	failed := errors.New("squatter mounts db")
	for _, c := range []struct {
		json bool
		res  volumerun.Result
		err  error
		want string
	}{
		{false, volumerun.Result{Run: run}, failed, "volume db: move run gen 2 undone\n"},
		{false, volumerun.Result{Nothing: &volumerun.Nothing{Writer: "m2", Message: "m2 already is the Writer of db: nothing to do"}}, nil, "m2 already is the Writer of db: nothing to do\n"},
		{true, volumerun.Result{Nothing: &volumerun.Nothing{Writer: "m2", Message: "nothing to do"}}, nil, "{\n  \"message\": \"nothing to do\",\n  \"run\": null,\n  \"writer\": \"m2\"\n}\n"},
		{false, volumerun.Result{}, failed, ""},
		{true, volumerun.Result{}, failed, ""},
	} {
		g.json = c.json
		var out bytes.Buffer
		cmd := &cobra.Command{}
		cmd.SetOut(&out)
		if err := printRun(cmd, c.res, c.err); err != c.err || out.String() != c.want {
			t.Errorf("json %v, %+v: %v, printed %q; want %q", c.json, c.res, err, out.String(), c.want)
		}
	}
	g.json = true
	defer func() { g.json = false }()
	var out bytes.Buffer
	cmd := &cobra.Command{}
	cmd.SetOut(&out)
	var doc struct{ Run operator.VolumeRun }
	if err := printRun(cmd, volumerun.Result{Run: run}, failed); err != failed || json.Unmarshal(out.Bytes(), &doc) != nil || doc.Run.State != operator.RunUndone || doc.Run.Error != run.Error {
		t.Fatalf("--json run: %v %s", err, out.String())
	}
}

// TestVolumeSnapshotCommands: `volume snapshot NAME SNAP` still takes a
// snapshot, while ls and restore are its subcommands.
func TestVolumeSnapshotCommands(t *testing.T) {
	root := volumeCommand()
	for args, want := range map[string]string{
		"snapshot db s1":         "snapshot",
		"snapshot ls db":         "ls",
		"snapshot restore db s1": "restore",
	} {
		c, _, err := root.Find(strings.Fields(args))
		if err != nil || c.Name() != want {
			t.Errorf("%s: found %v (%v), want %s", args, c.Name(), err, want)
		}
	}
}
