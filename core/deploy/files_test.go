package deploy

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const filesCompose = `name: shop
configs:
  proxy_conf: {file: ./proxy/default.conf}
  banner: {content: "hello ${WHO}"}
secrets:
  db_password: {file: ./db_password.txt}
  api_key: {environment: API_KEY}
services:
  proxy:
    image: nginx:1
    configs: [proxy_conf, {source: banner, target: /etc/banner, mode: 0440}]
    volumes: ["./static:/usr/share/nginx/html", "./proxy/extra.conf:/etc/extra.conf:ro"]
  api:
    image: api:1
    secrets: [db_password, {source: api_key, target: /etc/key}]
`

func writeTree(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func loadDir(t *testing.T, dir string) App {
	t.Helper()
	app, err := Load(context.Background(), Source{Compose: []byte(filesCompose), WorkingDir: dir,
		Env: map[string]string{"WHO": "you", "API_KEY": "k-123-secret"}})
	if err != nil {
		t.Fatal(err)
	}
	return app
}

func byName(app App) map[string]Service {
	m := map[string]Service{}
	for _, s := range app.Services {
		m[s.Name] = s
	}
	return m
}

func TestShippedFiles(t *testing.T) {
	tree := map[string]string{"proxy/default.conf": "server {}", "proxy/extra.conf": "x", "db_password.txt": "hunter2-secret",
		"static/index.html": "<h1>hi</h1>", "static/css/a.css": "body{}"}
	dir := writeTree(t, tree)
	app := loadDir(t, dir)
	svcs := byName(app)
	targets := map[string]string{}
	for _, s := range app.Services {
		for _, f := range s.Spec.Files {
			targets[s.Name+" "+f.Target] = f.Kind + " " + f.Source
			if string(app.Files[f.Digest]) == "" {
				t.Errorf("%s %s: no content kept for %s", s.Name, f.Target, f.Digest)
			}
		}
	}
	want := map[string]string{
		"proxy /proxy_conf":            "file config:proxy_conf",
		"proxy /etc/banner":            "file config:banner",
		"proxy /usr/share/nginx/html":  "dir ./static",
		"proxy /etc/extra.conf":        "file ./proxy/extra.conf",
		"api /run/secrets/db_password": "file secret:db_password",
		"api /etc/key":                 "file secret:api_key",
	}
	if len(targets) != len(want) {
		t.Fatalf("files: %v", targets)
	}
	for k, v := range want {
		if targets[k] != v {
			t.Errorf("%s: %q, want %q", k, targets[k], v)
		}
	}
	for _, f := range svcs["proxy"].Spec.Files {
		if f.Target == "/etc/banner" && (f.Mode != 0o440 || string(app.Files[f.Digest]) != "hello you") {
			t.Errorf("inline config: mode %o content %q", f.Mode, app.Files[f.Digest])
		}
	}
	// Relative binds are shipped, not bound from the Machine.
	for _, m := range svcs["proxy"].Spec.Mounts {
		t.Errorf("relative bind left as a Machine mount: %+v", m)
	}
	if !strings.Contains(strings.Join(app.Warnings, "\n"), "./static is shipped from this computer and mounted read-only") {
		t.Errorf("warnings: %v", app.Warnings)
	}
	// Secrets reach neither the plan nor the App's JSON.
	p, err := MakePlan(app, snapOf(machine("m1", nil)), PlanOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(struct {
		A App
		P Plan
	}{app, p})
	for _, secret := range []string{"hunter2-secret", "k-123-secret", "server {}"} {
		if strings.Contains(string(b), secret) {
			t.Errorf("%q is in the plan or app JSON", secret)
		}
	}
}

func TestShippedFileChangeRedeploysOnlyItsService(t *testing.T) {
	tree := map[string]string{"proxy/default.conf": "server {}", "proxy/extra.conf": "x", "db_password.txt": "pw", "static/index.html": "a"}
	dir := writeTree(t, tree)
	before := byName(loadDir(t, dir))
	hash := func(s Service) string { return SpecHash(s.Spec) }
	if hash(before["proxy"]) != hash(byName(loadDir(t, dir))["proxy"]) {
		t.Fatal("the same files gave a different spec hash")
	}
	for _, c := range []struct{ file, body, changed string }{
		{"proxy/default.conf", "server { listen 81; }", "proxy"},
		{"static/index.html", "b", "proxy"},
		{"db_password.txt", "pw2", "api"},
	} {
		if err := os.WriteFile(filepath.Join(dir, c.file), []byte(c.body), 0o644); err != nil {
			t.Fatal(err)
		}
		after := byName(loadDir(t, dir))
		for _, name := range []string{"proxy", "api"} {
			if changed := hash(before[name]) != hash(after[name]); changed != (name == c.changed) {
				t.Errorf("edit %s: %s changed=%v", c.file, name, changed)
			}
		}
		before = after
	}
}

func TestShippedFileErrors(t *testing.T) {
	dir := writeTree(t, map[string]string{"big": strings.Repeat("x", maxShippedFile+1)})
	for yaml, want := range map[string]string{
		"name: a\nservices:\n  s:\n    image: x\n    volumes: [\"./nope.conf:/etc/x\"]\n":                     "volumes[0]: ./nope.conf",
		"name: a\nservices:\n  s:\n    image: x\n    volumes: [\"./big:/etc/x\"]\n":                           "larger than",
		"name: a\nsecrets:\n  k: {environment: UNSET_VAR}\nservices:\n  s:\n    image: x\n    secrets: [k]\n": "UNSET_VAR, which is not set",
		"name: a\nconfigs:\n  c: {external: true}\nservices:\n  s:\n    image: x\n    configs: [c]\n":         "external",
	} {
		_, err := Load(context.Background(), Source{Compose: []byte(yaml), WorkingDir: dir})
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", yaml, err, want)
		}
	}
}

func TestDeclarationsOnlyReadsNoFiles(t *testing.T) {
	app, err := Load(context.Background(), Source{Compose: []byte(filesCompose), WorkingDir: t.TempDir(), DeclarationsOnly: true,
		Env: map[string]string{"API_KEY": "k"}})
	if err != nil {
		t.Fatalf("declarations of a compose file whose files are elsewhere: %v", err)
	}
	if len(app.Services) != 2 || len(app.Files) != 0 {
		t.Fatalf("services %d files %d", len(app.Services), len(app.Files))
	}
}
