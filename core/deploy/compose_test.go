package deploy

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"

	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/volprotect"
)

func load(t *testing.T, yaml string, env string) (App, error) {
	t.Helper()
	return Load(context.Background(), Source{Compose: []byte(yaml), Environment: env})
}

func TestLoadExample(t *testing.T) {
	b, err := os.ReadFile("../../examples/hello/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	app, err := Load(context.Background(), Source{Compose: b})
	if err != nil {
		t.Fatal(err)
	}
	if app.Namespace() != "hello-production" {
		t.Fatalf("namespace = %q", app.Namespace())
	}
	if len(app.Warnings) != 0 {
		t.Errorf("warnings on the example: %v", app.Warnings)
	}
	var order []string
	by := map[string]Service{}
	for _, s := range app.Services {
		order = append(order, s.Name)
		by[s.Name] = s
	}
	if strings.Join(order, ",") != "api,store,web" {
		t.Errorf("dependency order = %v, want api before web", order)
	}
	web, api, store := by["web"], by["api"], by["store"]
	if web.Replicas != 2 || web.MaxPerMachine != 1 || web.Spec.Readiness != ReadyHealthcheck || web.Spec.Healthcheck == nil || web.Spec.Healthcheck.IntervalMS != 2000 {
		t.Errorf("web = %+v", web)
	}
	if len(web.Ingress) != 1 || web.Ingress[0].Hostname != "hello.example.test" || len(web.Spec.Ports) != 0 {
		t.Errorf("web ingress = %+v ports %+v", web.Ingress, web.Spec.Ports)
	}
	if api.Spec.Readiness != ReadyNotify || len(api.Hooks) != 1 || api.Hooks[0].Environment["EXIT_CODE"] != "0" {
		t.Errorf("api = %+v", api)
	}
	if len(store.Volumes) != 1 || store.Volumes[0] != "hello-production-data" || len(store.HostPorts) != 1 || store.HostPorts[0] != 18082 {
		t.Errorf("store = %+v", store)
	}
	if store.Spec.Env["MESSAGE"] != "hello from store" || store.Spec.Namespace != "hello-production" {
		t.Errorf("store spec = %+v", store.Spec)
	}
}

// TestLoadSchedule: x-schedule, as a string or a mapping, makes the
// Service a scheduled job.
func TestLoadSchedule(t *testing.T) {
	app, err := load(t, `name: p
services:
  report:
    image: x
    x-schedule: "*/5 * * * *"
  cleanup:
    image: x
    x-schedule: {cron: "0 3 * * *", timezone: Europe/Paris, concurrency: allow}
  web:
    image: x
`, "")
	if err != nil {
		t.Fatal(err)
	}
	by := map[string]Service{}
	for _, s := range app.Services {
		by[s.Name] = s
	}
	if s := by["report"].Schedule; s == nil || s.Cron != "*/5 * * * *" || s.Concurrency != "forbid" {
		t.Errorf("report schedule = %+v", s)
	}
	if s := by["cleanup"].Schedule; s == nil || s.Timezone != "Europe/Paris" || s.Concurrency != "allow" {
		t.Errorf("cleanup schedule = %+v", s)
	}
	if by["web"].Schedule != nil {
		t.Errorf("web is not a job")
	}
}

func TestLoadEnvironmentAndProjectName(t *testing.T) {
	app, err := Load(context.Background(), Source{Compose: []byte("services:\n  a:\n    image: x\n"), ProjectName: "shop", Environment: "staging"})
	if err != nil || app.Namespace() != "shop-staging" {
		t.Fatalf("app = %+v, %v", app, err)
	}
	if _, err := load(t, "services:\n  a:\n    image: x\n", "Bad Env"); err == nil || !strings.Contains(err.Error(), "environment") {
		t.Fatalf("bad environment accepted: %v", err)
	}
}

func TestLoadInvalid(t *testing.T) {
	cases := map[string]struct{ yaml, want string }{
		"no image":         {"name: p\nservices:\n  web: {}\n", `service "web" has neither an image`},
		"bad readiness":    {"name: p\nservices:\n  web:\n    image: x\n    x-readiness: maybe\n", `service "web": x-readiness`},
		"readiness w/o hc": {"name: p\nservices:\n  web:\n    image: x\n    x-readiness: healthcheck\n", `needs a healthcheck`},
		"bad constraint":   {"name: p\nservices:\n  web:\n    image: x\n    x-placement:\n      constraints: [region]\n", `service "web": x-placement.constraints[0]`},
		"unknown x field":  {"name: p\nservices:\n  web:\n    image: x\n    x-placement:\n      zone: eu\n", `unknown field "zone"`},
		"x-ports w/o port": {"name: p\nservices:\n  web:\n    image: x\n    x-ports:\n      - hostname: a.b\n", `x-ports[0].container_port`},
		"bad mode":         {"name: p\nservices:\n  web:\n    image: x\n    x-placement:\n      mode: daemonset\n", `service "web": mode`},
		"negative":         {"name: p\nservices:\n  web:\n    image: x\n    deploy:\n      replicas: -1\n", `replicas`},
		"not yaml":         {"name: p\nservices: [\n", `compose.yaml`},
		"bad depends":      {"name: p\nservices:\n  web:\n    image: x\n    depends_on: [db]\n", `db`},
		"hook w/o command": {"name: p\nservices:\n  web:\n    image: x\n    x-pre_deploy:\n      - timeout_seconds: 3\n", `x-pre_deploy[0].command`},
		"bad x-port proto": {"name: p\nservices:\n  web:\n    image: x\n    x-ports:\n      - {host_port: 80, container_port: 80, protocol: sctp}\n", `x-ports[0].protocol`},
		"no name":          {"services:\n  web:\n    image: x\n", `project name`},
		"all volumes":      {"name: p\nservices:\n  db:\n    image: x\n    volumes: [\"/var/lib/ployz/volumes:/v\"]\n", `volumes[0].source: /var/lib/ployz/volumes holds every Provisioned Volume`},
		"bad schedule":     {"name: p\nservices:\n  report:\n    image: x\n    x-schedule: \"61 * * * *\"\n", `service "report": x-schedule: "61 * * * *"`},
		"bad timezone":     {"name: p\nservices:\n  report:\n    image: x\n    x-schedule: {cron: \"@daily\", timezone: Mars/Olympus}\n", `service "report": x-schedule.timezone: "Mars/Olympus"`},
		"job w/ ingress":   {"name: p\nservices:\n  report:\n    image: x\n    x-schedule: \"@daily\"\n    x-ports:\n      - {hostname: a.b, container_port: 80}\n", `service "report": x-schedule: a scheduled job takes no ingress route`},
		"job w/ host port": {"name: p\nservices:\n  report:\n    image: x\n    x-schedule: \"@daily\"\n    ports: [\"8080:80\"]\n", `x-schedule: a scheduled job publishes no host port`},
		"global writer":    {"name: p\nservices:\n  db:\n    image: x\n    volumes: [\"/var/lib/ployz/volumes/db:/v\"]\n    x-placement: {mode: global}\n", `Provisioned Volume db has one Writer`},
	}
	for name, c := range cases {
		_, err := load(t, c.yaml, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, c.want)
		}
	}
}

func TestLoadWarnsUnsupportedAndUnknownExtensions(t *testing.T) {
	app, err := load(t, `name: p
networks:
  front: {driver: overlay}
services:
  web:
    image: x
    hostname: h1
    x-colour: blue
    deploy:
      replicas: 0
      update_config: {parallelism: 2}
`, "")
	if err != nil {
		t.Fatal(err)
	}
	all := strings.Join(app.Warnings, "\n")
	for _, want := range []string{`networks.front: driver, ipam, internal, attachable and enable_ipv* are ignored`, `key "hostname" is ignored`, `unknown extension x-colour`, `"deploy.update_config"`} {
		if !strings.Contains(all, want) {
			t.Errorf("warnings lack %q:\n%s", want, all)
		}
	}
	if app.Services[0].Replicas != 0 {
		t.Errorf("replicas: 0 lost: %d", app.Services[0].Replicas)
	}
}

func TestSetReplicasAndRemoveService(t *testing.T) {
	b, err := os.ReadFile("../../examples/hello/compose.yaml")
	if err != nil {
		t.Fatal(err)
	}
	scaled, err := SetReplicas(b, "store", 0)
	if err != nil {
		t.Fatal(err)
	}
	scaled, err = SetReplicas(scaled, "web", 5)
	if err != nil {
		t.Fatal(err)
	}
	app, err := Load(context.Background(), Source{Compose: scaled})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]int{}
	for _, s := range app.Services {
		got[s.Name] = s.Replicas
	}
	if got["store"] != 0 || got["web"] != 5 || got["api"] != 2 {
		t.Fatalf("replicas = %v", got)
	}
	if !strings.Contains(string(scaled), "# ingress route") {
		t.Error("comments lost")
	}
	less, err := RemoveService(scaled, "api")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Load(context.Background(), Source{Compose: less}); err == nil || !strings.Contains(err.Error(), "api") {
		t.Fatalf("web depends on api; removing api should be refused by the loader: %v", err)
	}
	if _, err := SetReplicas(b, "nope", 1); err == nil || !strings.Contains(err.Error(), `"nope" is not declared`) {
		t.Fatalf("unknown service: %v", err)
	}
}

func TestComposeWarningsAreTidy(t *testing.T) {
	yaml := "version: \"3\"\nname: w\nservices:\n  s:\n    image: x\n    environment: {A: \"${TZ}\", B: \"${TZ}-${LANG_X}\", C: \"${ZED}\"}\n"
	var logged strings.Builder
	logrus.SetOutput(&logged)
	defer logrus.SetOutput(os.Stderr)
	app, err := Load(context.Background(), Source{Compose: []byte(yaml), Env: map[string]string{}})
	if err != nil {
		t.Fatal(err)
	}
	if logged.Len() != 0 {
		t.Fatalf("compose-go logged raw lines: %q", logged.String())
	}
	all := strings.Join(app.Warnings, "\n")
	for _, want := range []string{
		`variable TZ is not set, so a blank string is used (service "s" key "environment.A", service "s" key "environment.B")`,
		`variable LANG_X is not set, so a blank string is used (service "s" key "environment.B")`,
		`variable ZED is not set, so a blank string is used (service "s" key "environment.C")`,
		`top-level key "version" is obsolete`,
	} {
		if strings.Count(all, want) != 1 {
			t.Fatalf("warnings lack %q once:\n%s", want, all)
		}
	}
	for _, w := range app.Warnings {
		if strings.Contains(w, "level=") || strings.Contains(w, "time=") {
			t.Fatalf("raw log line in warnings: %q", w)
		}
	}
}

func TestLoadBuild(t *testing.T) {
	yaml := `name: shop
services:
  web:
    build: {context: ./app, dockerfile: Dockerfile.prod, target: final, args: {VERSION: "1.2", EMPTY: null}}
  named:
    image: registry.example/team/named:v3
    build: ./named
  plain:
    image: nginx:1
`
	app, err := Load(context.Background(), Source{Compose: []byte(yaml), WorkingDir: "/src/shop"})
	if err != nil {
		t.Fatal(err)
	}
	by := byName(app)
	web, named := by["web"], by["named"]
	if b := web.Build; b == nil || b.Context != "/src/shop/app" || b.Dockerfile != "Dockerfile.prod" || b.Target != "final" ||
		b.Args["VERSION"] != "1.2" || len(b.Args) != 1 || b.Repo != "shop-production-web" || web.Spec.Image != "shop-production-web" {
		t.Fatalf("web build: %+v image %q", web.Build, web.Spec.Image)
	}
	if named.Build == nil || named.Build.Repo != "registry.example/team/named" || named.Build.Context != "/src/shop/named" {
		t.Fatalf("named build: %+v", named.Build)
	}
	if by["plain"].Build != nil {
		t.Fatal("plain has a build")
	}
	// Built images reach Machines by push: never pulled, whatever --pull says.
	if pullPolicy(PullAlways, web) != PullNever || pullPolicy(PullAlways, by["plain"]) != PullAlways {
		t.Fatal("pull policy of a built image")
	}
	for y, want := range map[string]string{
		"name: a\nservices:\n  s:\n    build: {context: \"https://github.com/x/y.git\"}\n": "build.context",
		"name: a\nservices:\n  s:\n    build: {dockerfile_inline: \"FROM scratch\"}\n":     "dockerfile_inline",
		"name: a\nservices:\n  s:\n    command: [x]\n":                                     "neither an image nor a build context",
	} {
		if _, err := Load(context.Background(), Source{Compose: []byte(y)}); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: err %v, want %q", y, err, want)
		}
	}
}

func TestCheckService(t *testing.T) {
	compose := []byte("services:\n  web:\n    image: x\n")
	if err := CheckService(compose, "web"); err != nil {
		t.Fatalf("declared service refused: %v", err)
	}
	if err := CheckService(compose, "api"); err == nil || !strings.Contains(err.Error(), `"api"`) {
		t.Fatalf("undeclared service: %v", err)
	}
}

// TestLoadRefusesPortRangesQuickly: a port range is refused naming the
// Service and entry before the loader expands it (65,535 ports took
// seconds and were then accepted); FuzzLoad found it as a stalled worker.
func TestLoadRefusesPortRangesQuickly(t *testing.T) {
	for _, ports := range []string{"'1-65535:1-65535'", "'8080-8081:80'", "'80', '127.0.0.1:9000-9001:90'"} {
		start := time.Now()
		_, err := Load(context.Background(), Source{Compose: []byte("name: p\nservices:\n  web:\n    image: x\n    ports: [" + ports + "]\n"), WorkingDir: t.TempDir()})
		if err == nil || !strings.HasPrefix(err.Error(), `service "web": ports[`) || !strings.Contains(err.Error(), "port ranges are not supported") {
			t.Errorf("ports %s: %v", ports, err)
		}
		if took := time.Since(start); took > 2*time.Second {
			t.Errorf("ports %s: refused after %v", ports, took)
		}
	}
	if _, err := Load(context.Background(), Source{Compose: []byte("name: p\nservices:\n  web:\n    image: x\n    ports: ['8080:80', {target: 90, published: '9090'}]\n"), WorkingDir: t.TempDir()}); err != nil {
		t.Fatalf("single ports refused: %v", err)
	}
}

// TestLoadProvisionedVolumes: a bind mount under the Provisioned Volumes'
// root names its volume once, for volume locality; other binds do not.
func TestLoadProvisionedVolumes(t *testing.T) {
	a, err := load(t, `name: p
services:
  db:
    image: x
    volumes:
      - /var/lib/ployz/volumes/pg:/var/lib/postgresql/data
      - /var/lib/ployz/volumes/pg/conf:/etc/pg:ro
      - /var/lib/ployz/volumes/wal:/wal
      - /srv/shared:/shared
`, "")
	if err != nil {
		t.Fatal(err)
	}
	db := a.Services[0]
	if strings.Join(db.Provisioned, ",") != "pg,wal" || len(db.Volumes) != 0 || len(db.Spec.Mounts) != 4 {
		t.Fatalf("provisioned %v, volumes %v, mounts %+v", db.Provisioned, db.Volumes, db.Spec.Mounts)
	}
}

func TestLoadDeclaredProvisionedVolumes(t *testing.T) {
	a, err := load(t, `name: p
services:
  db:
    image: x
    volumes: ["data:/var/lib/postgresql/data", "cache:/cache", "old:/old:ro"]
volumes:
  data:
    driver: ployz-zfs
    driver_opts: {size: 64MiB}
  old:
    driver: ployz-zfs
    name: legacy-pg
    x-volume:
      snapshots: {hourly: 24, daily: 7}
      mirror: {machine: m2, every: 15m}
  cache: {}
`, "")
	if err != nil {
		t.Fatal(err)
	}
	db := a.Services[0]
	if strings.Join(db.Provisioned, ",") != "p-production-data,legacy-pg" || strings.Join(db.Volumes, ",") != "p-production-cache" {
		t.Fatalf("provisioned %v, docker volumes %v", db.Provisioned, db.Volumes)
	}
	m := db.Spec.Mounts[0]
	if m.Type != "bind" || m.Source != "/var/lib/ployz/volumes/p-production-data" || m.Target != "/var/lib/postgresql/data" {
		t.Fatalf("mount %+v", m)
	}
	if m := db.Spec.Mounts[2]; m.Source != "/var/lib/ployz/volumes/legacy-pg" || !m.ReadOnly {
		t.Fatalf("named mount %+v", m)
	}
	if len(a.Provisioned) != 2 || a.Provisioned[0].Protect != nil || a.Provisioned[1].Protect == nil {
		t.Fatalf("declared %+v", a.Provisioned)
	}
	pol := *a.Provisioned[1].Protect
	if pol.Snapshots != (volprotect.Retention{Hourly: 24, Daily: 7}) || pol.Mirror == nil || pol.Mirror.Machine != "m2" || pol.Mirror.Every != "15m" {
		t.Fatalf("x-volume %+v %+v", pol, pol.Mirror)
	}
	a.Provisioned[1].Protect = nil
	want := []ProvisionedVolume{{Key: "data", Name: "p-production-data", SizeBytes: 64 << 20}, {Key: "old", Name: "legacy-pg"}}
	if fmt.Sprint(a.Provisioned) != fmt.Sprint(want) {
		t.Fatalf("declared %+v", a.Provisioned)
	}

	for _, c := range []struct{ vol, want string }{
		{"{driver: ployz-zfs, driver_opts: {size: lots}}", "volumes.data.driver_opts.size:"},
		{"{driver: ployz-zfs, driver_opts: {size: 1KiB}}", "below the minimum"},
		{"{driver: ployz-zfs, driver_opts: {compression: lz4}}", "volumes.data.driver_opts.compression: ployz-zfs takes only size"},
		{"{driver: ployz-zfs, name: Bad/Name}", "volumes.data.name:"},
		{"{driver: ployz-zfs, x-volume: {snapshots: {hourly: -2}}}", "volumes.data.x-volume.snapshots.hourly: -2: want 0 or more"},
		{"{driver: ployz-zfs, x-volume: {mirror: {machine: m2, every: soon}}}", `volumes.data.x-volume.mirror.every: "soon" is not a duration`},
		{"{driver: ployz-zfs, x-volume: {snapshot: {daily: 7}}}", "volumes.data.x-volume.snapshot: unknown key"},
		{"{x-volume: {snapshots: {daily: 7}}}", "volumes.data.x-volume: only a Provisioned Volume (driver: ployz-zfs)"},
	} {
		_, err := load(t, "name: p\nservices:\n  db:\n    image: x\n    volumes: [\"data:/d\"]\nvolumes:\n  data: "+c.vol+"\n", "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want %q", c.vol, err, c.want)
		}
	}
}

// TestLoadBuildInputs: build.secrets, ssh, additional_contexts and
// cache_from reach the Build as Docker Compose hands them to BuildKit
// (they were dropped, so RUN --mount=type=secret found no secret); what
// a build cannot read is refused naming the field.
func TestLoadBuildInputs(t *testing.T) {
	yaml := `name: shop
services:
  web:
    build:
      context: ./app
      secrets: [token, {source: npmrc, target: npm}]
      ssh: [default, "deploy=./keys/id"]
      additional_contexts: {assets: ./assets, base: "docker-image://alpine:3"}
      cache_from: [shop/web:cache]
secrets:
  token: {file: ./token.txt}
  npmrc: {environment: NPM_TOKEN}
`
	app, err := Load(context.Background(), Source{Compose: []byte(yaml), WorkingDir: "/src/shop", DeclarationsOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	b := byName(app)["web"].Build
	want := []images.BuildSecret{{ID: "token", File: "/src/shop/token.txt"}, {ID: "npm", Env: "NPM_TOKEN"}}
	if b == nil || !slices.Equal(b.Secrets, want) {
		t.Fatalf("secrets %+v, want %+v", b.Secrets, want)
	}
	if !slices.Equal(b.SSH, []string{"default", "deploy=/src/shop/keys/id"}) {
		t.Errorf("ssh %v", b.SSH)
	}
	if b.AdditionalContexts["assets"] != "/src/shop/assets" || b.AdditionalContexts["base"] != "docker-image://alpine:3" {
		t.Errorf("additional contexts %v", b.AdditionalContexts)
	}
	if !slices.Equal(b.CacheFrom, []string{"shop/web:cache"}) {
		t.Errorf("cache_from %v", b.CacheFrom)
	}
	for y, field := range map[string]string{
		"name: a\nservices:\n  s:\n    build: {context: ., secrets: [c]}\nsecrets:\n  c: {external: true}\n":                    "build.secrets[0]",
		"name: a\nservices:\n  s:\n    build: {context: ., additional_contexts: {x: \"service:other\"}}\n  other: {build: .}\n": "build.additional_contexts.x",
	} {
		if _, err := Load(context.Background(), Source{Compose: []byte(y), WorkingDir: "/src/a", DeclarationsOnly: true}); err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%s: err %v, want it to name %s", y, err, field)
		}
	}
}
