package operator

import (
	"testing"
	"time"
)

func TestDeployRecordsRewriteAndList(t *testing.T) {
	s, p := open(t)
	t0 := time.Date(2026, 12, 2, 3, 0, 0, 0, time.UTC)
	for i, id := range []string{"d1", "d2"} {
		at := t0.Add(time.Duration(i) * time.Minute)
		if err := s.SaveDeploy(DeployRow{Context: "lab", DeploymentID: id, Namespace: "app-prod", StartedAt: at, UpdatedAt: at, Body: []byte(`{"status":"running"}`)}); err != nil {
			t.Fatal(err)
		}
	}
	// A rewrite keeps the start and replaces the body.
	if err := s.SaveDeploy(DeployRow{Context: "lab", DeploymentID: "d1", Namespace: "app-prod", StartedAt: t0.Add(time.Hour), UpdatedAt: t0.Add(time.Minute), Body: []byte(`{"status":"completed"}`)}); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveDeploy(DeployRow{Context: "other", DeploymentID: "d9", StartedAt: t0, UpdatedAt: t0, Body: []byte(`{}`)}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s, err := Open(p)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	rows, err := s.Deploys("lab", 10)
	if err != nil || len(rows) != 2 {
		t.Fatalf("rows %+v, %v", rows, err)
	}
	if rows[0].DeploymentID != "d2" || rows[1].DeploymentID != "d1" || string(rows[1].Body) != `{"status":"completed"}` || !rows[1].StartedAt.Equal(t0) || !rows[1].UpdatedAt.Equal(t0.Add(time.Minute)) {
		t.Fatalf("rows %+v", rows)
	}
	if rows, _ := s.Deploys("lab", 1); len(rows) != 1 || rows[0].DeploymentID != "d2" {
		t.Fatalf("limit 1: %+v", rows)
	}
}

func TestDeployRecordsTrimmed(t *testing.T) {
	s, _ := open(t)
	t0 := time.Now()
	for i := range KeepDeploys + 5 {
		at := t0.Add(time.Duration(i) * time.Second)
		if err := s.SaveDeploy(DeployRow{Context: "lab", DeploymentID: "d" + string(rune('a'+i%26)) + time.Duration(i).String(), StartedAt: at, UpdatedAt: at, Body: []byte(`{}`)}); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := s.Deploys("lab", 1000)
	if err != nil || len(rows) != KeepDeploys {
		t.Fatalf("%d rows kept, %v", len(rows), err)
	}
}
