package e2e

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"golang.org/x/crypto/bcrypt"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/images"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/e2e/lab"
	"github.com/ployz/ployz/internal/dockertest"
)

// registryVersion is the distribution release the lab registry is built
// from, through the Go module proxy (no image comes from the internet).
const registryVersion = "v3.1.2"

// buildRegistry builds distribution's registry as a static binary once per
// host (cached in the temp dir) and returns its path.
func buildRegistry(ctx context.Context, t *testing.T) string {
	t.Helper()
	dir := filepath.Join(os.TempDir(), "ployz-e2e-registry-"+registryVersion)
	bin := filepath.Join(dir, "registry")
	if _, err := os.Stat(bin); err == nil {
		return bin
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	mod := "module registrybuild\n\ngo 1.24\n\nrequire github.com/distribution/distribution/v3 " + registryVersion + "\n"
	if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(mod), 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-mod=mod", "-o", bin+".tmp", "github.com/distribution/distribution/v3/cmd/registry")
	cmd.Dir, cmd.Env = dir, append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build registry %s: %v\n%s", registryVersion, err, out)
	}
	if err := os.Rename(bin+".tmp", bin); err != nil {
		t.Fatal(err)
	}
	return bin
}

// labRegistry is a registry with htpasswd auth and a self-signed
// certificate, running inside one lab Machine on its lab address; every
// Machine's Docker trusts the certificate (certs.d).
type labRegistry struct {
	host, user, pass string
}

func startRegistry(ctx context.Context, t *testing.T, l *lab.Lab, on string) labRegistry {
	t.Helper()
	bin := buildRegistry(ctx, t)
	m, err := l.Machine(on)
	if err != nil {
		t.Fatal(err)
	}
	r := labRegistry{host: m.IP.String() + ":5000", user: "labuser", pass: "pw-" + deploy.NewID(8)}
	dir := t.TempDir()
	certPEM, keyPEM := selfSigned(t, m.IP.String())
	hash, err := bcrypt.GenerateFromPassword([]byte(r.pass), bcrypt.DefaultCost)
	if err != nil {
		t.Fatal(err)
	}
	cfg := fmt.Sprintf("version: 0.1\nlog: {level: info}\nstorage: {filesystem: {rootdirectory: /var/lib/lab-registry}}\n"+
		"http: {addr: \"%s\", tls: {certificate: /etc/lab-registry/cert.pem, key: /etc/lab-registry/key.pem}}\n"+
		"auth: {htpasswd: {realm: lab, path: /etc/lab-registry/htpasswd}}\n", r.host)
	for name, b := range map[string][]byte{"cert.pem": certPEM, "key.pem": keyPEM, "htpasswd": []byte(r.user + ":" + string(hash) + "\n"), "config.yml": []byte(cfg)} {
		if err := os.WriteFile(filepath.Join(dir, name), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := lab.Docker(ctx, "cp", dir+"/.", m.Container+":/etc/lab-registry"); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Docker(ctx, "cp", bin, m.Container+":/usr/local/bin/lab-registry"); err != nil {
		t.Fatal(err)
	}
	if _, err := lab.Docker(ctx, "exec", "-d", m.Container, "sh", "-c", "/usr/local/bin/lab-registry serve /etc/lab-registry/config.yml >/var/log/lab-registry.log 2>&1"); err != nil {
		t.Fatal(err)
	}
	for _, mm := range l.Machines {
		if _, err := l.Exec(ctx, mm.Name, "mkdir", "-p", "/etc/docker/certs.d/"+r.host); err != nil {
			t.Fatal(err)
		}
		if _, err := lab.Docker(ctx, "cp", filepath.Join(dir, "cert.pem"), mm.Container+":/etc/docker/certs.d/"+r.host+"/ca.crt"); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		out, err := l.Exec(ctx, on, "sh", "-c", "cat /var/log/lab-registry.log")
		if err == nil && strings.Contains(out, "listening on") {
			return r
		}
		if time.Now().After(deadline) {
			t.Fatalf("lab registry did not start: %v\n%s", err, out)
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// push tags a Machine's image into the registry and pushes it with the
// registry's credentials; the Machine then forgets the tag and the login.
func (r labRegistry) push(ctx context.Context, t *testing.T, l *lab.Lab, on, image, as string) string {
	t.Helper()
	ref := r.host + "/" + as
	script := fmt.Sprintf("set -e; echo %q | docker login -u %s --password-stdin %s; docker tag %s %s; docker push -q %s; docker rmi %s; docker logout %s",
		r.pass, r.user, r.host, image, ref, ref, ref, r.host)
	if out, err := l.Exec(ctx, on, "sh", "-c", script); err != nil {
		t.Fatalf("push %s: %v\n%s", ref, err, out)
	}
	return ref
}

// dockerConfig writes an operator Docker config holding the registry's
// credentials (or none) and returns its directory.
func (r labRegistry) dockerConfig(t *testing.T, withCreds bool) string {
	t.Helper()
	dir := t.TempDir()
	cfg := `{"auths":{}}`
	if withCreds {
		cfg = fmt.Sprintf(`{"auths":{%q:{"auth":%q}}}`, r.host, base64.StdEncoding.EncodeToString([]byte(r.user+":"+r.pass)))
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

func selfSigned(t *testing.T, ip string) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "lab registry"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(24 * time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}
	tmpl.IPAddresses = []net.IP{net.ParseIP(ip)}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// TestImagePull: a Service naming an image in a private registry deploys
// with the operator's Docker credentials (each Machine pulls it), and
// fails clearly, naming each Machine's pull, without them.
func TestImagePull(t *testing.T) {
	needLightLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	formCluster(t, l, op)
	reg := startRegistry(ctx, t, l, "m1")
	if err := l.LoadImage(ctx, lab.TestAppImage, "m1"); err != nil {
		t.Fatal(err)
	}
	ref := reg.push(ctx, t, l, "m1", lab.TestAppImage, "team/app:1")
	compose := fmt.Sprintf("name: pulled\nservices:\n  app:\n    image: %s\n    deploy: {mode: global}\n", ref)

	t.Run("without-credentials", func(t *testing.T) {
		op.env = []string{"DOCKER_CONFIG=" + reg.dockerConfig(t, false)}
		doc, errs, code := deployFile(t, op, compose)
		if code != 3 || doc.Outcome == nil {
			t.Fatalf("deploy without credentials: exit %d, want 3\n%s", code, errs)
		}
		failed := map[string]string{}
		for _, s := range doc.Outcome.Steps {
			if s.Action == rpc.CmdPullImage && s.Status == deploy.StepFailed {
				failed[s.Machine] = s.Error
			}
			if s.Action == rpc.CmdCreateContainer && s.Status != deploy.StepNeverAttempted {
				t.Errorf("%s: create ran after a failed pull: %+v", s.Machine, s)
			}
		}
		for _, m := range l.Machines {
			if e := failed[m.Name]; !strings.Contains(e, ref) || !strings.Contains(e, m.Name) {
				t.Errorf("%s: failed pull step %q should name the image and Machine", m.Name, e)
			}
		}
	})

	t.Run("with-credentials", func(t *testing.T) {
		op.env = []string{"DOCKER_CONFIG=" + reg.dockerConfig(t, true)}
		doc, errs, code := deployFile(t, op, compose)
		if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy with credentials: exit %d, outcome %+v\n%s", code, doc.Outcome, errs)
		}
		pulled := map[string]bool{}
		for _, s := range doc.Outcome.Steps {
			if s.Action == rpc.CmdPullImage && s.Status == deploy.StepCompleted {
				pulled[s.Machine] = true
			}
		}
		if len(pulled) != len(l.Machines) {
			t.Errorf("pulled on %v, want every Machine", pulled)
		}
		if n, _ := count(ps(t, op, "pulled"), "app"); n != len(l.Machines) {
			t.Errorf("app: %d ready, want %d", n, len(l.Machines))
		}
		// The credential was used for the pulls and kept nowhere.
		for _, m := range l.Machines {
			out, _ := l.Exec(ctx, m.Name, "sh", "-c", fmt.Sprintf("journalctl --no-pager -o cat | grep -c %q; grep -rlsF %q /var/lib/ployz /root/.docker || true", reg.pass, reg.pass))
			if strings.TrimSpace(out) != "0" {
				t.Errorf("%s: the registry password appears in logs or state:\n%s", m.Name, out)
			}
		}
	})
}

// builtCompose's web is built with what Docker Compose users write today
// (webDockerfile): its build secret comes from the top-level secrets.
const builtCompose = `name: built
services:
  web:
    build:
      context: ./web
      args: {GREETING: from-build, BASE: %s}
      secrets: [build_token]
    environment: {MESSAGE: built-web}
  proxy:
    image: ployz-testapp:latest
    environment: {PROXY_CONFIG: /etc/proxy/upstream.conf}
    volumes: ["./proxy/upstream.conf:/etc/proxy/upstream.conf:ro"]
    depends_on: [web]
    x-ports:
      - hostname: built.example.test
        container_port: 8080
secrets:
  build_token: {file: ./build_token.txt}
`

// webDockerfile uses the syntax directive, a $BUILDPLATFORM stage on an
// image the operator's Docker holds (nothing can be pulled), a heredoc
// RUN with a cache mount and a secret mount, and a FROM scratch stage
// with the static testapp. The RUN fails the build unless the secret is
// served; the image keeps only that it was.
const webDockerfile = `# syntax=docker/dockerfile:1
ARG BASE
FROM --platform=$BUILDPLATFORM ${BASE} AS prep
ARG TARGETARCH
RUN --mount=type=cache,target=/var/cache/prep --mount=type=secret,id=build_token,required=true <<EOF
set -e
mkdir -p /out
echo run >> /var/cache/prep/runs
test "$(cat /run/secrets/build_token)" = "lab-build-token"
echo served > /out/secret
echo "$TARGETARCH" > /out/arch
EOF
COPY <<EOF /out/greeting
hello from a heredoc
EOF
FROM scratch
ARG GREETING
LABEL greeting=$GREETING
COPY testapp /testapp
COPY --from=prep /out/ /build/
ENTRYPOINT ["/testapp"]
`

// proxyGet is hostGet that also returns the X-Proxy-Name header.
func proxyGet(ip, host string) (string, string, error) {
	req, err := http.NewRequest("GET", "http://"+ip+"/", nil)
	if err != nil {
		return "", "", err
	}
	req.Host = host
	resp, err := (&http.Client{Timeout: 5 * time.Second}).Do(req)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", "", fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return resp.Header.Get("X-Proxy-Name"), string(b), nil
}

// TestBuildAndShippedConfig: a compose file whose web Service is built
// by the operator's BuildKit from a Dockerfile written for Docker
// Compose (webDockerfile: syntax directive, heredocs, a cache and a
// secret mount, a $BUILDPLATFORM stage) and whose proxy mounts a config
// file next to the compose file deploys with no manual image step and
// answers through the ingress; editing the config file and redeploying
// builds nothing and replaces only the proxy; a dry run after a source
// change builds nothing and says so.
func TestBuildAndShippedConfig(t *testing.T) {
	needLightLab(t)
	l := lab.ForTest(t, 2)
	op := newOperator(t, l)
	formCluster(t, l, op)

	dir := t.TempDir()
	bin, err := os.ReadFile(filepath.Join(os.Getenv(lab.EnvBinDir), "testapp"))
	if err != nil {
		t.Fatal(err)
	}
	for name, body := range map[string][]byte{
		"web/testapp":         bin,
		"web/Dockerfile":      []byte(webDockerfile),
		"build_token.txt":     []byte("lab-build-token"),
		"proxy/upstream.conf": []byte("upstream http://web:8080\nname v1\n"),
		"compose.yaml":        []byte(fmt.Sprintf(builtCompose, dockertest.ShellImage(t))),
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, body, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	const repo = "built-production-web"
	dockertest.RemoveRepo(repo)
	t.Cleanup(func() { dockertest.RemoveRepo(repo) })
	deployDir := func(t *testing.T) (deployDoc, string) {
		t.Helper()
		out, errs, code := op.run(t, "deploy", "-f", filepath.Join(dir, "compose.yaml"), "-y", "--json")
		var doc deployDoc
		if code != 0 || json.Unmarshal([]byte(out), &doc) != nil || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy: exit %d\n%s\n%s", code, out, errs)
		}
		return doc, errs
	}
	answer := func(t *testing.T, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			name, body, err := proxyGet(l.Machines[0].IP.String(), "built.example.test")
			if err == nil && name == want && strings.Contains(body, "built-web") {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("ingress: proxy %q body %q err %v, want proxy %q in front of built-web", name, body, err, want)
			}
			time.Sleep(time.Second)
		}
	}

	var tag, created string
	t.Run("first-deploy", func(t *testing.T) {
		doc, errs := deployDir(t)
		tag = serviceImage(doc.Plan, "web")
		if !strings.HasPrefix(tag, repo+":") {
			t.Errorf("web image %q is not content-tagged", tag)
		}
		if !strings.Contains(errs, "built web as "+tag) {
			t.Errorf("the deploy did not say it built web as %s:\n%s", tag, errs)
		}
		info := inspectHostImage(t, tag)
		created = info.Created
		if info.Architecture != "amd64" || info.Config.Labels["greeting"] != "from-build" {
			t.Errorf("built image: %s, labels %v", info.Architecture, info.Config.Labels)
		}
		files := hostImageFiles(t, tag, "/build")
		for f, want := range map[string]string{"secret": "served\n", "arch": "amd64\n", "greeting": "hello from a heredoc\n"} {
			if files[f] != want {
				t.Errorf("/build/%s = %q, want %q (files %v)", f, files[f], want, files)
			}
		}
		answer(t, "v1")
	})
	t.Run("edit-config-replaces-only-proxy", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "proxy/upstream.conf"), []byte("upstream http://web:8080\nname v2\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		doc, errs := deployDir(t)
		if o := ops(doc.Plan, "web"); o[deploy.OpUnchanged] != 1 || len(o) != 1 {
			t.Errorf("web rows %v, want unchanged only (same build, same tag)", o)
		}
		if o := ops(doc.Plan, "proxy"); o[deploy.OpReplace] != 1 {
			t.Errorf("proxy rows %v, want one replace", o)
		}
		// The unchanged context built nothing: no build step, the same
		// tag, the same image (its creation time).
		if strings.Contains(errs, "building web") || !strings.Contains(errs, "web unchanged: "+tag+" already built, nothing built") {
			t.Errorf("the second deploy built, or did not say it built nothing:\n%s", errs)
		}
		if again := inspectHostImage(t, tag).Created; again != created {
			t.Errorf("%s created %s, then %s: rebuilt", tag, created, again)
		}
		answer(t, "v2")
	})
	t.Run("dry-run-builds-nothing", func(t *testing.T) {
		if err := os.WriteFile(filepath.Join(dir, "web/version.txt"), []byte("v2"), 0o644); err != nil {
			t.Fatal(err)
		}
		before, builtBefore := hostImages(t, ""), hostImages(t, repo)
		out, errs, code := op.run(t, "deploy", "-f", filepath.Join(dir, "compose.yaml"), "-y", "--dry-run")
		after, builtAfter := hostImages(t, ""), hostImages(t, repo)
		if code != 0 {
			t.Fatalf("dry run: exit %d\n%s\n%s", code, out, errs)
		}
		m := regexp.MustCompile(`dry run: web would be built as (\S+) \(nothing built, pushed or pulled\)`).FindStringSubmatch(errs)
		if m == nil || m[1] == tag {
			t.Fatalf("the dry run did not say web would be built under a new tag:\n%s", errs)
		}
		if slices.Contains(after, m[1]) || !slices.Equal(builtBefore, builtAfter) {
			t.Errorf("the dry run built %s: %s images %v, then %v", m[1], repo, builtBefore, builtAfter)
		}
		for _, img := range after {
			if !slices.Contains(before, img) && strings.HasPrefix(img, repo) {
				t.Errorf("the dry run added %s to this computer's Docker", img)
			}
		}
		// The plan (on stderr) replaces web, whose sources changed.
		if !strings.Contains(errs, "plan for built-production") || !regexp.MustCompile(`(?m)^\S+\s+web\s+replace`).MatchString(errs) {
			t.Errorf("the dry run did not print a plan replacing web:\n%s", errs)
		}
	})
}

// hostImages lists the repo:tag names this computer's Docker holds
// (only repo's when set).
func hostImages(t *testing.T, repo string) []string {
	t.Helper()
	args := []string{"images", "--format", "{{.Repository}}:{{.Tag}}"}
	if repo != "" {
		args = append(args, repo)
	}
	out, err := exec.Command("docker", args...).Output()
	if err != nil {
		t.Fatalf("docker images: %v", err)
	}
	var tags []string
	for _, l := range strings.Fields(string(out)) {
		if !strings.HasSuffix(l, ":<none>") {
			tags = append(tags, l)
		}
	}
	return tags
}

type hostImage struct {
	Created      string
	Architecture string
	Config       struct{ Labels map[string]string }
}

func inspectHostImage(t *testing.T, ref string) hostImage {
	t.Helper()
	out, err := exec.Command("docker", "image", "inspect", ref).Output()
	var infos []hostImage
	if err != nil || json.Unmarshal(out, &infos) != nil || len(infos) != 1 {
		t.Fatalf("docker image inspect %s: %v", ref, err)
	}
	return infos[0]
}

// hostImageFiles reads the regular files under dir of an image in this
// computer's Docker (a created, never started Container copied out).
func hostImageFiles(t *testing.T, ref, dir string) map[string]string {
	t.Helper()
	id, err := exec.Command("docker", "create", ref).Output()
	if err != nil {
		t.Fatalf("docker create %s: %v", ref, err)
	}
	ctr := strings.TrimSpace(string(id))
	defer exec.Command("docker", "rm", ctr).Run() // best effort
	out, err := exec.Command("docker", "cp", ctr+":"+dir, "-").Output()
	if err != nil {
		t.Fatalf("docker cp %s: %v", dir, err)
	}
	files := map[string]string{}
	tr := tar.NewReader(bytes.NewReader(out))
	for {
		h, err := tr.Next()
		if err != nil {
			return files
		}
		if h.Typeflag == tar.TypeReg {
			b, _ := io.ReadAll(tr)
			files[path.Base(h.Name)] = string(b)
		}
	}
}

// serviceImage is the image a plan's rows give a Service.
func serviceImage(p deploy.Plan, service string) string {
	for _, r := range p.Rows {
		if r.Service == service && r.Spec != nil {
			return r.Spec.Image
		}
	}
	return ""
}

// TestImageDeliveredOnce pushes an image to 3 Machines and counts what
// reached the Entry Machine's network interface (the operator's link
// ends there): about the image once, not once per Machine, since the
// entry relays it to the others over the mesh. Every Machine then holds
// the image, and a second push finds it present everywhere.
func TestImageDeliveredOnce(t *testing.T) {
	needLightLab(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Minute)
	defer cancel()
	l := lab.ForTest(t, 3)
	op := newOperator(t, l)
	formCluster(t, l, op)
	const size = 48 << 20
	importBenchImage(ctx, t, size)
	rx := func() []int64 {
		var out []int64
		for _, m := range l.Machines {
			s, err := l.Exec(ctx, m.Name, "cat", "/sys/class/net/eth0/statistics/rx_bytes")
			if err != nil {
				t.Fatal(err)
			}
			var n int64
			fmt.Sscan(s, &n)
			out = append(out, n)
		}
		return out
	}
	before := rx()
	var res []images.Result
	op.json(t, &res, "image", "push", benchImage)
	after := rx()
	for _, r := range res {
		if r.Outcome != "pushed" {
			t.Errorf("%s: %+v, want pushed", r.MachineName, r)
		}
	}
	if len(res) != 3 {
		t.Fatalf("results %+v, want 3 Machines", res)
	}
	for i, m := range l.Machines {
		got := after[i] - before[i]
		t.Logf("%s received %d bytes (image %d)", m.Name, got, int64(size))
		if got < size {
			t.Errorf("%s received %d bytes, less than the image", m.Name, got)
		}
		if out, err := l.Exec(ctx, m.Name, "docker", "image", "inspect", "-f", "{{.Id}}", benchImage); err != nil {
			t.Errorf("%s lacks the image: %v %s", m.Name, err, out)
		}
	}
	// The operator's link: what reached the entry, m1. Each byte once,
	// plus framing and the small answers of the other Machines.
	if got := after[0] - before[0]; got > size*5/4 {
		t.Errorf("the Entry Machine received %d bytes for a %d-byte image to 3 Machines: more than once", got, int64(size))
	}
	op.json(t, &res, "image", "push", benchImage)
	for _, r := range res {
		if r.Outcome != "present" {
			t.Errorf("second push, %s: %+v, want present", r.MachineName, r)
		}
	}
}
