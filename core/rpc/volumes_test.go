package rpc

import (
	"encoding/json"
	"os"
	"reflect"
	"strings"
	"testing"
)

// TestVolumePayloadFixtures pins the volume payloads' JSON: a Volume
// with its copy and bookmarks (additive), one from a daemon before copies (no copy:
// nil, never a zero copy), and a set_volume_copy request and answer.
func TestVolumePayloadFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-copy.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Volume    Volume               `json:"volume"`
		OldVolume Volume               `json:"old_volume"`
		Request   SetVolumeCopyRequest `json:"set_volume_copy"`
		Answer    VolumeCopySet        `json:"volume_copy_set"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if c := doc.Volume.Copy; c == nil || *c != (VolumeCopy{Role: "writer", Epoch: 1764687000000000000, Floor: 3}) {
		t.Fatalf("volume copy: %+v", c)
	}
	if bm := doc.Volume.Bookmarks; len(bm) != 1 || bm[0] != (VolumeBookmark{Name: "run-1", Created: 1764686000000000000, GUID: "1111"}) {
		t.Fatalf("volume bookmarks: %+v", bm)
	}
	if doc.OldVolume.Copy != nil || doc.OldVolume.Name != "db" || doc.OldVolume.Bookmarks != nil {
		t.Fatalf("an old daemon's volume: %+v", doc.OldVolume)
	}
	if doc.Request != (SetVolumeCopyRequest{Volume: "db", Gen: 4, Expect: "none", Want: "mirror"}) {
		t.Fatalf("request: %+v", doc.Request)
	}
	if doc.Answer != (VolumeCopySet{MachineID: "m2id", Volume: "db", Copy: VolumeCopy{Role: "mirror", Floor: 4}, Changed: true}) {
		t.Fatalf("answer: %+v", doc.Answer)
	}
	reencodes(t, b, map[string]any{"volume": doc.Volume, "set_volume_copy": doc.Request, "volume_copy_set": doc.Answer})
}

// reencodes checks that each value, encoded, writes the same keys as the
// fixture's entry of its name (minus the one a later version added).
func reencodes(t *testing.T, fixture []byte, docs map[string]any) {
	t.Helper()
	var all map[string]json.RawMessage
	if err := json.Unmarshal(fixture, &all); err != nil {
		t.Fatal(err)
	}
	for key, v := range docs {
		out, _ := json.Marshal(v)
		var got, want map[string]any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal(all[key], &want)
		delete(want, "a_later_field")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s re-encodes as %s", key, out)
		}
	}
}

// TestMovePayloadsFixture pins list_containers' writers (volume locality)
// and export_container's answer; an older Machine's list has no writers.
func TestMovePayloadsFixture(t *testing.T) {
	b, err := os.ReadFile("testdata/containers-move.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		List   ContainerList          `json:"container_list"`
		Old    ContainerList          `json:"old_container_list"`
		Export ContainerExport        `json:"container_export"`
		Req    ExportContainerRequest `json:"export_container_request"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if strings.Join(doc.List.Writers, ",") != "db,wal" || doc.List.Labels["zone"] != "a" || doc.Old.Writers != nil {
		t.Fatalf("lists: %+v / %+v", doc.List, doc.Old)
	}
	e := doc.Export
	if e.ID != "c1" || e.Spec.Env["POSTGRES_PASSWORD"] != "hunter2" || len(e.Spec.Mounts) != 1 || e.Spec.Mounts[0].Source != "/var/lib/ployz/volumes/db" || e.Spec.DeploymentID != "d1" {
		t.Fatalf("export: %+v", e)
	}
	if len(e.Spec.Files) != 1 || string(e.Files[e.Spec.Files[0].Digest]) != "hunter2" || e.Spec.Files[0].Mode != 0o400 {
		t.Fatalf("export's shipped files: %+v / %d contents", e.Spec.Files, len(e.Files))
	}
	if doc.Req != (ExportContainerRequest{ID: "c1", WithFiles: true}) {
		t.Fatalf("export request: %+v", doc.Req)
	}
}

// TestVolumeTransferFixtures pins send_volume_to's request and events:
// a progress event with and without the estimate, the last one carrying
// the target's answer; a later field is ignored, and re-encoding writes
// the keys the fixture holds.
func TestVolumeTransferFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-transfer.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Request    SendVolumeToRequest `json:"send_volume_to"`
		Resume     SendVolumeToRequest `json:"send_volume_to_resume"`
		Progress   VolumeTransfer      `json:"progress"`
		NoEstimate VolumeTransfer      `json:"progress_no_estimate"`
		Done       VolumeTransfer      `json:"done"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if doc.Request != (SendVolumeToRequest{Volume: "db", Snapshot: "run-3", FromSnapshot: "run-2", Target: "m2", Resumable: true}) {
		t.Fatalf("request: %+v", doc.Request)
	}
	if s := doc.Resume.Send(); s != (SendVolumeRequest{Volume: "db", ResumeToken: "1-abc-def"}) || doc.Resume.Target != "5f3c" {
		t.Fatalf("resume: %+v → %+v", doc.Resume, s)
	}
	if doc.Progress != (VolumeTransfer{TargetID: "m2id", Bytes: 1 << 20, EstimatedBytes: 16 << 20}) || doc.NoEstimate.EstimatedBytes != 0 || doc.NoEstimate.Received != nil {
		t.Fatalf("progress: %+v, %+v", doc.Progress, doc.NoEstimate)
	}
	if r := doc.Done.Received; r == nil || r.Bytes != 16842752 || r.Volume.Name != "db" || r.Volume.Snapshots[0].GUID != "1234" || r.Volume.Copy.Role != "none" {
		t.Fatalf("done: %+v", doc.Done)
	}
	var all map[string]json.RawMessage
	_ = json.Unmarshal(b, &all)
	for key, v := range map[string]any{"send_volume_to": doc.Request, "send_volume_to_resume": doc.Resume, "progress": doc.Progress,
		"progress_no_estimate": doc.NoEstimate, "done": doc.Done} {
		out, _ := json.Marshal(v)
		var got, want map[string]any
		_ = json.Unmarshal(out, &got)
		_ = json.Unmarshal(all[key], &want)
		delete(want, "a_later_field")
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s re-encodes as %s", key, out)
		}
	}
}

// TestVolumeTaskFixtures pins volume_task's request (one kind's request
// beside kind) and its answers: busy, and a failed one a later version
// extended (unknown keys are ignored).
func TestVolumeTaskFixtures(t *testing.T) {
	b, err := os.ReadFile("testdata/volume-task.json")
	if err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Stop   VolumeTaskRequest `json:"volume_task_stop"`
		Pull   VolumeTaskRequest `json:"volume_task_pull"`
		Busy   VolumeTaskState   `json:"busy"`
		Failed VolumeTaskState   `json:"failed"`
	}
	if err := json.Unmarshal(b, &doc); err != nil {
		t.Fatal(err)
	}
	if s := doc.Stop; s.Volume != "db" || s.Gen != 5 || s.Expect != "writer" || s.Kind != TaskStop || s.Start != nil || s.Pull != nil ||
		s.Stop == nil || *s.Stop != (StopContainerRequest{ID: "c1", GracePeriodSeconds: 10}) {
		t.Fatalf("stop: %+v", s)
	}
	if p := doc.Pull; p.Kind != TaskPull || p.Expect != "none" || p.Pull == nil || *p.Pull != (PullImageRequest{Image: "app:1", RegistryAuth: "e30"}) {
		t.Fatalf("pull: %+v", p)
	}
	if doc.Busy != (VolumeTaskState{MachineID: "m1id", Volume: "db", Gen: 5, Kind: TaskStop, Subject: "c1", State: TaskBusy, ElapsedSeconds: 12.5}) {
		t.Fatalf("busy: %+v", doc.Busy)
	}
	if doc.Failed != (VolumeTaskState{MachineID: "m1id", Volume: "db", Gen: 5, Kind: TaskStart, Subject: "c1", State: TaskFailed,
		Error: "start container c1: port taken", Code: CodeUnavailable, ElapsedSeconds: 0.4, Joined: true}) {
		t.Fatalf("failed: %+v", doc.Failed)
	}
	reencodes(t, b, map[string]any{"volume_task_stop": doc.Stop, "volume_task_pull": doc.Pull, "busy": doc.Busy, "failed": doc.Failed})
}
