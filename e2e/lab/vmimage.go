package lab

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"

	"github.com/ployz/ployz/packaging"
)

// VMOS is the Debian release of VM Machines: the one whose kernel, headers
// and zfs-dkms (contrib) the recipe installs.
const VMOS = Debian12

// vmRoot holds VM images (images/) and running VM labs (labs/). Images are
// sparse ext4 files, so a lab costs little disk until written.
func vmRoot() string {
	if d := os.Getenv("PLOYZ_LABVM_DIR"); d != "" {
		return d
	}
	return "/var/tmp/ployz-labvm"
}

// vmImage is what a VM Machine boots: a kernel, its initramfs and a root
// filesystem image that each VM uses as the backing file of its own disk.
type vmImage struct {
	Kernel string `json:"kernel"`
	Initrd string `json:"initrd"`
	Rootfs string `json:"rootfs"`
}

// BuildVMImage returns the VM Machine image holding the binaries in binDir:
// the VM recipe's image (built from the Debian 12 lab base when the recipe
// changed: minutes, the zfs module compiles) with the binaries and units
// written into a copy of its root filesystem (seconds).
func BuildVMImage(ctx context.Context, binDir string, logf func(string, ...any)) (vmImage, error) {
	suite, _ := VMOS.suite()
	base, err := buildBase(ctx, VMOS, suite, logf)
	if err != nil {
		return vmImage{}, err
	}
	dir, err := buildVMBase(ctx, base, logf)
	if err != nil {
		return vmImage{}, err
	}
	img := vmImage{Kernel: filepath.Join(dir, "vmlinuz"), Initrd: filepath.Join(dir, "initrd.img")}
	img.Rootfs, err = buildVMMachine(ctx, dir, binDir, logf)
	return img, err
}

// buildVMBase runs packaging/labvm/vm.sh over base unless a directory named
// by the hash of base and the recipe exists.
func buildVMBase(ctx context.Context, base string, logf func(string, ...any)) (string, error) {
	dir, err := vmBaseDir(base)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(dir, "rootfs.ext4")); err == nil {
		return dir, nil
	}
	logf("lab: building VM image %s from %s (kernel, udev, zfs-dkms: many minutes; cached afterwards)", dir, base)
	tmp, err := os.MkdirTemp("", "ployz-labvm-recipe")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(tmp)
	if err := os.CopyFS(tmp, packaging.Files); err != nil {
		return "", fmt.Errorf("unpack VM recipe: %w", err)
	}
	script := filepath.Join(tmp, "labvm", "vm.sh")
	if err := os.Chmod(script, 0o755); err != nil {
		return "", err
	}
	if err := os.Chmod(filepath.Join(tmp, "labvm", "rootfs", "usr", "local", "sbin", "ployz-labvm-seed"), 0o755); err != nil {
		return "", err
	}
	if err := run(ctx, "nice", "-n", "5", script, base, dir); err != nil {
		return "", fmt.Errorf("VM image: %w", err)
	}
	pruneDirs(filepath.Dir(dir), "base-", dir)
	return dir, nil
}

// vmBaseDir is where the VM recipe's image built from base is kept: named
// by the hash of base and the recipe.
func vmBaseDir(base string) (string, error) {
	h := sha256.New()
	fmt.Fprintf(h, "base=%s\x00", base)
	if err := hashTree(h, "labvm"); err != nil {
		return "", err
	}
	return filepath.Join(vmRoot(), "images", "base-"+hex.EncodeToString(h.Sum(nil))[:16]), nil
}

// VMImageCached reports whether BuildVMImage would find the slow part of
// the VM image (the base and the recipe's kernel and ZFS) built, without
// building anything: the directory it would use, and whether it is there.
func VMImageCached(ctx context.Context) (string, bool, error) {
	suite, _ := VMOS.suite()
	base, err := baseTag(VMOS, suite)
	if err != nil {
		return "", false, err
	}
	dir, err := vmBaseDir(base)
	if err != nil {
		return "", false, err
	}
	if !imageExists(ctx, base) {
		return dir, false, nil
	}
	_, err = os.Stat(filepath.Join(dir, "rootfs.ext4"))
	return dir, err == nil, nil
}

// buildVMMachine copies the base root filesystem (sparse) and writes the
// binaries and units into the copy with debugfs: no mount, no loop device.
func buildVMMachine(ctx context.Context, baseDir, binDir string, logf func(string, ...any)) (string, error) {
	h := sha256.New()
	h.Write([]byte(baseDir))
	files, err := binaryFiles(binDir, "VM image")
	if err != nil {
		return "", err
	}
	units, err := unitFiles()
	if err != nil {
		return "", err
	}
	unitDir, err := os.MkdirTemp("", "ployz-labvm-units")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(unitDir)
	// debugfs copies host files: write the units out first.
	for dst, b := range units {
		p := filepath.Join(unitDir, filepath.Base(dst))
		if err := os.WriteFile(p, b, 0o644); err != nil {
			return "", err
		}
		files[dst] = p
	}
	if err := hashFiles(h, files); err != nil {
		return "", err
	}
	out := filepath.Join(vmRoot(), "images", "machine-"+hex.EncodeToString(h.Sum(nil))[:16]+".ext4")
	if _, err := os.Stat(out); err == nil {
		return out, nil
	}
	logf("lab: writing binaries into VM image %s", out)
	tmp := out + ".tmp"
	if err := run(ctx, "cp", "--sparse=always", filepath.Join(baseDir, "rootfs.ext4"), tmp); err != nil {
		return "", err
	}
	if err := debugfsWrite(ctx, tmp, files); err != nil {
		os.Remove(tmp)
		return "", err
	}
	if err := os.Rename(tmp, out); err != nil {
		return "", err
	}
	pruneDirs(filepath.Dir(out), "machine-", out)
	return out, nil
}

// debugfsWrite replaces each file (path in image -> host path) in the ext4
// image img, owned by root with the host file's mode.
func debugfsWrite(ctx context.Context, img string, files map[string]string) error {
	// docker export leaves /.dockerenv, which makes systemd believe it runs
	// in a container (no udev, no module loading).
	script := bytes.NewBufferString("rm /.dockerenv\n")
	keys := make([]string, 0, len(files))
	for k := range files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, dst := range keys {
		st, err := os.Stat(files[dst])
		if err != nil {
			return err
		}
		fmt.Fprintf(script, "cd %s\nrm %s\nwrite %s %s\nsif %s mode 0%o\nsif %s uid 0\nsif %s gid 0\n",
			filepath.Dir(dst), filepath.Base(dst), files[dst], filepath.Base(dst),
			filepath.Base(dst), 0o100000|st.Mode().Perm(), filepath.Base(dst), filepath.Base(dst))
	}
	cmd := exec.CommandContext(ctx, "debugfs", "-w", "-f", "-", img)
	cmd.Stdin = script
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("debugfs %s: %w: %s", img, err, out)
	}
	return nil
}

// pruneDirs removes the other entries of dir starting with prefix: earlier
// builds, so code changes do not pile up images.
func pruneDirs(dir, prefix, keep string) {
	entries, _ := os.ReadDir(dir)
	for _, e := range entries {
		p := filepath.Join(dir, e.Name())
		if strings.HasPrefix(e.Name(), prefix) && p != keep && !strings.HasSuffix(p, ".tmp") {
			os.RemoveAll(p)
		}
	}
}

// run runs a host command; its error carries the command's output.
func run(ctx context.Context, name string, args ...string) error {
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s %s: %w: %s", name, strings.Join(short(args), " "), err, strings.TrimSpace(string(out)))
	}
	return nil
}
