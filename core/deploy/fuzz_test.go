package deploy

import (
	"context"
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
)

// FuzzLoad loads arbitrary bytes as a compose file. Properties: no panic;
// loading is deterministic (the same file gives the same App and spec
// hashes, so a plan never changes by itself); an accepted App has valid
// names, an image for every Service, Containers in its namespace and
// dependencies before their dependants; a refusal says where: the file,
// a service, the project name or the environment.
func FuzzLoad(f *testing.F) {
	if b, err := os.ReadFile("../../examples/hello/compose.yaml"); err == nil {
		f.Add(b)
	}
	f.Add([]byte("name: p\nservices:\n  web:\n    image: x\n    x-ports:\n      - {hostname: a.example.test, container_port: 80}\n      - {ingress_port: 5432, container_port: 5432, protocol: tcp}\n"))
	f.Add([]byte("name: p\nservices:\n  a:\n    image: x\n    depends_on: [b]\n  b:\n    image: y\n    depends_on: [a]\n"))
	f.Add([]byte("name: p\nservices:\n  a:\n    image: x\n    ports: ['8080-8081:80']\n    volumes: ['data:/d', '/h:/c']\n    deploy: {mode: global, replicas: -1}\nvolumes: {data: {}}\n"))
	f.Add([]byte("name: p\nservices:\n  a:\n    image: x\n    environment: [A]\n    labels: {ployz.x: y}\n    restart: sometimes\n    x-placement: {constraints: ['zone=='], max_per_machine: -1}\n"))
	f.Add([]byte("name: P\nservices: {}\n"))
	dir := f.TempDir() // no file outside it is meant to be read
	f.Fuzz(func(t *testing.T, compose []byte) {
		src := Source{Compose: compose, WorkingDir: dir}
		app, err := Load(context.Background(), src)
		if err != nil {
			msg := err.Error()
			if !slices.ContainsFunc([]string{"compose.yaml: ", `service "`, "project name", "environment "}, func(p string) bool { return strings.HasPrefix(msg, p) }) {
				t.Fatalf("refusal does not say where: %v", err)
			}
			return
		}
		again, err := Load(context.Background(), src)
		if err != nil {
			t.Fatalf("second load refused what the first accepted: %v", err)
		}
		a, _ := json.Marshal(app)
		b, _ := json.Marshal(again)
		if string(a) != string(b) {
			t.Fatalf("two loads differ:\n %s\n %s", a, b)
		}
		if !nameRE.MatchString(app.Project) || !nameRE.MatchString(app.Environment) || len(app.Services) == 0 {
			t.Fatalf("accepted app %s-%s with %d services", app.Project, app.Environment, len(app.Services))
		}
		seen := map[string]bool{}
		for i, s := range app.Services {
			if !nameRE.MatchString(s.Name) || s.Spec.Image == "" || s.Replicas < 0 {
				t.Fatalf("accepted service %+v", s)
			}
			if s.Spec.Namespace != app.Namespace() || s.Spec.Service != s.Name {
				t.Fatalf("service %s spec in %s/%s, want %s", s.Name, s.Spec.Namespace, s.Spec.Service, app.Namespace())
			}
			if SpecHash(s.Spec) != SpecHash(again.Services[i].Spec) {
				t.Fatalf("service %s: spec hash differs between loads", s.Name)
			}
			for _, d := range s.DependsOn {
				if !seen[d] {
					t.Fatalf("service %s comes before its dependency %s", s.Name, d)
				}
			}
			seen[s.Name] = true
		}
	})
}
