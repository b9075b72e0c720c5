package client

import (
	"strings"
	"testing"

	"github.com/ployz/ployz/core/deploy"
)

func TestPreviousCompleted(t *testing.T) {
	recs := []deploy.Record{
		{Revision: 5, Status: "failed"},
		{Revision: 4, Status: "partial"},
		{Revision: 3, Status: deploy.RecordCompleted},
		{Revision: 2, Status: deploy.RecordCompleted},
		{Revision: 0, Status: deploy.RecordCompleted}, // a record older than revisions in records
	}
	// After a failed revision 5, the last good one; after a completed 3,
	// the one before it; nothing before the first.
	for latest, want := range map[int]int{5: 3, 3: 2, 2: 0, 6: 3} {
		if got := previousCompleted(recs, latest); got != want {
			t.Errorf("previousCompleted(latest %d) = %d, want %d", latest, got, want)
		}
	}
}

func TestPinImages(t *testing.T) {
	app := deploy.App{Services: []deploy.Service{
		{Name: "web", Build: &deploy.Build{Repo: "hello-web"}},
		{Name: "api"},
	}}
	app.Services[1].Spec.Image = "api:1"
	if err := pinImages(&app, map[string]string{"web": "hello-web:build-abc", "api": "api:0"}, "rollback to revision 2"); err != nil {
		t.Fatal(err)
	}
	if app.Services[0].Spec.Image != "hello-web:build-abc" || app.Services[0].Build != nil {
		t.Fatalf("web not pinned to its recorded build: %+v", app.Services[0])
	}
	if app.Services[1].Spec.Image != "api:1" {
		t.Fatalf("an image: Service keeps its revision's image, got %q", app.Services[1].Spec.Image)
	}

	app.Services[0].Build = &deploy.Build{Repo: "hello-web"}
	err := pinImages(&app, nil, "rollback to revision 2")
	if err == nil || !strings.Contains(err.Error(), "web") || !strings.Contains(err.Error(), "rollback to revision 2") {
		t.Fatalf("a build: Service with no recorded image = %v; want refused naming it", err)
	}
}

func TestErrImagesNowhereNamesEachImage(t *testing.T) {
	err := errImagesNowhere([]deploy.MissingImage{{Service: "web", Image: "web:old"}, {Service: "api", Image: "api:old"}})
	for _, want := range []string{"nothing changed", "service web: image web:old", "service api: image api:old", "ployz image push web:old"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
}
