package lab

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/ployz/ployz/packaging"
)

// Image names. The base is tagged by the hash of its recipe, the Machine
// image by the hash of base + binaries + units, so each is rebuilt only
// when what it is made from changes.
const (
	baseRepo    = "ployz-lab-base"
	machineRepo = "ployz-lab-machine"
	bareRepo    = "ployz-lab-bare"
	// TestAppImage is the workload image every lab Machine can run.
	TestAppImage = "ployz-testapp:latest"
)

// dockerDropIn configures a lab Machine's dockerd for what only a
// container Machine lacks: /proc/sys is read-only there, so Docker 26
// cannot turn IPv6 off on an IPv4-only Container's interface and, without
// this, refuses to start the Container (a real server's dockerd can).
const dockerDropIn = `[Service]
Environment=DOCKER_ALLOW_IPV6_ON_IPV4_INTERFACE=1
`

// Binaries lists the files a Machine image carries in /usr/local/bin.
var Binaries = []string{
	"ployz", "ployzd",
	"ployz-dns", "ployz-ingress-caddy", "ployz-logstore", "ployz-metrics", "ployz-volume-zfs",
}

// BuildMachineImage returns the tag of a DefaultOS Machine image holding the
// binaries in binDir (see BuildMachineImageFor).
func BuildMachineImage(ctx context.Context, binDir string, logf func(string, ...any)) (string, error) {
	return BuildMachineImageFor(ctx, DefaultOS, binDir, logf)
}

// BuildMachineImageFor returns the tag of a dist Machine image holding the
// binaries in binDir, building that OS's Debian base first when its recipe
// changed.
func BuildMachineImageFor(ctx context.Context, dist OS, binDir string, logf func(string, ...any)) (string, error) {
	base, err := baseFor(ctx, dist, logf)
	if err != nil {
		return "", err
	}
	return buildMachine(ctx, dist, base, binDir, logf)
}

// baseFor is dist's base image, built when its recipe changed.
func baseFor(ctx context.Context, dist OS, logf func(string, ...any)) (string, error) {
	suite, err := dist.suite()
	if err != nil {
		return "", err
	}
	return buildBase(ctx, dist, suite, logf)
}

// BuildBareImageFor returns the tag of a dist Machine image without Ployz:
// the base with only the lab's docker drop-in, for tests that install
// Ployz the way a user does (a .deb, a release channel).
func BuildBareImageFor(ctx context.Context, dist OS, logf func(string, ...any)) (string, error) {
	base, err := baseFor(ctx, dist, logf)
	if err != nil {
		return "", err
	}
	return layerImage(ctx, bareRepo+"-"+string(dist), base, nil, nil, logf)
}

func buildMachine(ctx context.Context, dist OS, base, binDir string, logf func(string, ...any)) (string, error) {
	files, err := binaryFiles(binDir, "machine image")
	if err != nil {
		return "", err
	}
	units, err := unitFiles()
	if err != nil {
		return "", err
	}
	return layerImage(ctx, machineRepo+"-"+string(dist), base, files, units, logf)
}

// layerImage commits base with files (image path -> host path), units and
// the docker drop-in layered over it, tagged repo:<hash of all of them>.
func layerImage(ctx context.Context, repo, base string, files map[string]string, units map[string][]byte, logf func(string, ...any)) (string, error) {
	h := sha256.New()
	h.Write([]byte(base))
	if err := hashFiles(h, files); err != nil {
		return "", err
	}
	for _, dst := range slices.Sorted(maps.Keys(units)) {
		h.Write([]byte(dst))
		h.Write(units[dst])
	}
	h.Write([]byte(dockerDropIn))
	tag := repo + ":" + hex.EncodeToString(h.Sum(nil))[:16]
	if imageExists(ctx, tag) {
		return tag, nil
	}
	logf("lab: building Machine image %s", tag)

	// Layer the binaries and units over the base: create, copy, commit.
	// No Dockerfile and no builder, so nothing can try to pull.
	var layer bytes.Buffer
	tw := tar.NewWriter(&layer)
	for dst, src := range files {
		if err := addFile(tw, dst, src, 0o755); err != nil {
			return "", err
		}
	}
	for dst, b := range units {
		if err := addBytes(tw, dst, b, 0o644); err != nil {
			return "", err
		}
	}
	if err := tw.WriteHeader(&tar.Header{Name: "etc/systemd/system/docker.service.d/", Mode: 0o755, Typeflag: tar.TypeDir}); err != nil {
		return "", err
	}
	if err := addBytes(tw, "/etc/systemd/system/docker.service.d/ployz-lab.conf", []byte(dockerDropIn), 0o644); err != nil {
		return "", err
	}
	if err := tw.Close(); err != nil {
		return "", err
	}
	ctr, err := docker(ctx, "create", base)
	if err != nil {
		return "", err
	}
	defer docker(context.WithoutCancel(ctx), "rm", "-f", ctr)
	if _, err := dockerIO(ctx, &layer, "cp", "-", ctr+":/"); err != nil {
		return "", err
	}
	if _, err := docker(ctx, "commit", ctr, tag); err != nil {
		return "", err
	}
	pruneOld(ctx, repo, tag)
	return tag, nil
}

// buildBase returns dist's base image tag, running the debootstrap recipe
// for suite only when no image carries the hash of the recipe and suite.
func buildBase(ctx context.Context, dist OS, suite string, logf func(string, ...any)) (string, error) {
	tag, err := baseTag(dist, suite)
	if err != nil {
		return "", err
	}
	repo, _, _ := strings.Cut(tag, ":")
	if imageExists(ctx, tag) {
		return tag, nil
	}
	logf("lab: building %s base image %s with debootstrap %s (minutes; cached afterwards)", dist, tag, suite)
	if err := runRecipe(ctx, suite, tag); err != nil {
		return "", fmt.Errorf("%s base image: %w", dist, err)
	}
	pruneOld(ctx, repo, tag)
	return tag, nil
}

// baseTag is the base image's tag: its repository and the hash of the
// suite and the recipe, so a changed recipe builds a new image.
func baseTag(dist OS, suite string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "suite=%s\x00", suite)
	if err := hashTree(h, "lab"); err != nil {
		return "", err
	}
	return baseRepo + "-" + string(dist) + ":" + hex.EncodeToString(h.Sum(nil))[:16], nil
}

// runRecipe unpacks the embedded recipe and runs base.sh for suite.
func runRecipe(ctx context.Context, suite, tag string) error {
	dir, err := os.MkdirTemp("", "ployz-lab-recipe")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := os.CopyFS(dir, packaging.Files); err != nil {
		return fmt.Errorf("unpack recipe: %w", err)
	}
	if err := os.Chmod(filepath.Join(dir, "lab", "base.sh"), 0o755); err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, filepath.Join(dir, "lab", "base.sh"), suite, tag)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("%w\n%s", err, out.String())
	}
	return nil
}

// testAppRef is the content tag of the testapp image this process built
// (BuildTestApp); "" before it.
var testAppRef string

// BuildTestApp imports the static testapp binary from binDir as a
// FROM-scratch image under a tag of its content, then tags it
// TestAppImage. Machines load it by the content tag (LoadTestApp): labs
// of several checkouts share the host's TestAppImage tag, and another
// one's import may move it between this build and a lab's boot.
func BuildTestApp(ctx context.Context, binDir string) error {
	h := sha256.New()
	if err := hashFiles(h, map[string]string{"testapp": filepath.Join(binDir, "testapp")}); err != nil {
		return fmt.Errorf("testapp image: %w (run `make build`)", err)
	}
	sum := hex.EncodeToString(h.Sum(nil))[:16]
	repo, _, _ := strings.Cut(TestAppImage, ":")
	ref := repo + ":" + sum
	if !imageExists(ctx, ref) {
		var layer bytes.Buffer
		tw := tar.NewWriter(&layer)
		if err := addFile(tw, "testapp", filepath.Join(binDir, "testapp"), 0o755); err != nil {
			return fmt.Errorf("testapp image: %w (run `make build`)", err)
		}
		if err := tw.Close(); err != nil {
			return err
		}
		if _, err := dockerIO(ctx, &layer, "import",
			"-c", `ENTRYPOINT ["/testapp"]`,
			"-c", "EXPOSE 8080",
			"-c", "LABEL ployz.testapp="+sum,
			"-", ref); err != nil {
			return err
		}
	}
	if _, err := docker(ctx, "tag", ref, TestAppImage); err != nil {
		return err
	}
	testAppRef = ref
	return nil
}

// TestAppRef is the content tag of this process's testapp image, for a
// compose file that must run exactly this build: a deploy delivers the
// host's image of the tag it names, and the host's TestAppImage is any
// checkout's latest import. TestAppImage when BuildTestApp did not run.
func TestAppRef() string {
	if testAppRef == "" {
		return TestAppImage
	}
	return testAppRef
}

// LoadTestApp loads this process's testapp image into every Machine as
// TestAppImage (the host's TestAppImage when BuildTestApp did not run).
func (l *Lab) LoadTestApp(ctx context.Context) error {
	if testAppRef == "" {
		return l.LoadImage(ctx, TestAppImage)
	}
	if err := l.LoadImage(ctx, testAppRef); err != nil {
		return err
	}
	for _, m := range l.Machines {
		if _, err := l.Exec(ctx, m.Name, "docker", "tag", testAppRef, TestAppImage); err != nil {
			return fmt.Errorf("tag %s as %s on %s: %w", testAppRef, TestAppImage, m.Name, err)
		}
	}
	return nil
}

func imageExists(ctx context.Context, tag string) bool {
	_, err := docker(ctx, "image", "inspect", "--format", "{{.Id}}", tag)
	return err == nil
}

// pruneOld removes earlier tags of repo so code changes do not pile up
// images; an image still used by a container stays (docker refuses).
func pruneOld(ctx context.Context, repo, keep string) {
	out, err := docker(ctx, "images", "--format", "{{.Repository}}:{{.Tag}}", repo)
	if err != nil {
		return
	}
	for _, t := range strings.Fields(out) {
		if t != keep {
			docker(ctx, "rmi", t) // best effort
		}
	}
}

// hashTree writes every embedded file under dir (path, size, bytes, in
// path order) into h: a recipe's identity.
func hashTree(h io.Writer, dir string) error {
	var paths []string
	err := fs.WalkDir(packaging.Files, dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, p)
		}
		return err
	})
	if err != nil {
		return err
	}
	sort.Strings(paths)
	for _, p := range paths {
		b, _ := packaging.Files.ReadFile(p)
		fmt.Fprintf(h, "%s\x00%d\x00", p, len(b))
		h.Write(b)
	}
	return nil
}

// binaryFiles maps each of Binaries' path in an image to its path in
// binDir, refusing a missing one on behalf of what.
func binaryFiles(binDir, what string) (map[string]string, error) {
	files := map[string]string{} // path in image -> path on host
	for _, b := range Binaries {
		p := filepath.Join(binDir, b)
		if _, err := os.Stat(p); err != nil {
			return nil, fmt.Errorf("%s: binary %s missing in %s (run `make build`): %w", what, b, binDir, err)
		}
		files["/usr/local/bin/"+b] = p
	}
	return files, nil
}

// unitFiles is every systemd unit Ployz ships, by its path in a Machine's
// root filesystem.
func unitFiles() (map[string][]byte, error) {
	names, err := fs.Glob(packaging.Files, "systemd/*.service")
	if err != nil {
		return nil, err
	}
	units := make(map[string][]byte, len(names))
	for _, n := range names {
		b, err := packaging.Files.ReadFile(n)
		if err != nil {
			return nil, err
		}
		units["/etc/systemd/system/"+path.Base(n)] = b
	}
	return units, nil
}

func hashFiles(h io.Writer, files map[string]string) error {
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		f, err := os.Open(files[k])
		if err != nil {
			return err
		}
		fmt.Fprintf(h, "%s\x00", k)
		_, err = io.Copy(h, f)
		f.Close()
		if err != nil {
			return err
		}
	}
	return nil
}

func addFile(tw *tar.Writer, name, src string, mode int64) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return addBytes(tw, name, b, mode)
}

func addBytes(tw *tar.Writer, name string, b []byte, mode int64) error {
	if err := tw.WriteHeader(&tar.Header{Name: strings.TrimPrefix(name, "/"), Mode: mode, Size: int64(len(b)), Typeflag: tar.TypeReg}); err != nil {
		return err
	}
	_, err := tw.Write(b)
	return err
}
