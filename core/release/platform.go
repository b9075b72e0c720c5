package release

import (
	"bufio"
	"fmt"
	"slices"
	"strings"
)

// Platform is what a server runs, as found over SSH: the OS and CPU a
// bundle must be built for, and the distribution.
type Platform struct {
	OS     string `json:"os"`   // linux
	Arch   string `json:"arch"` // amd64, arm64
	Distro string `json:"distro"`
}

// DetectCommand prints what ParsePlatform reads, in one SSH round trip.
const DetectCommand = "uname -s; uname -m; cat /etc/os-release 2>/dev/null || true"

// Arches maps `uname -m` answers to the Go arch of the bundle they run.
// armv8l is a 32-bit userland on a 64-bit CPU: it cannot run arm64
// binaries, so it is not here.
var Arches = map[string]string{"x86_64": "amd64", "amd64": "amd64", "aarch64": "arm64", "arm64": "arm64"}

// supportedDistros are the os-release IDs (or ID_LIKE entries) whose
// Docker packages and systemd the install knows.
var supportedDistros = []string{"debian", "ubuntu"}

// ParsePlatform reads DetectCommand's output: uname -s, uname -m, then
// /etc/os-release. An OS, CPU or distribution no release is built for is
// refused naming what was found.
func ParsePlatform(out string) (Platform, error) {
	lines := strings.SplitN(strings.TrimSpace(out), "\n", 3)
	if len(lines) < 2 {
		return Platform{}, fmt.Errorf("server platform: cannot read `uname -s; uname -m` (got %q)", out)
	}
	kernel, machine := strings.TrimSpace(lines[0]), strings.TrimSpace(lines[1])
	if kernel != "Linux" {
		return Platform{}, fmt.Errorf("server OS: uname -s says %q; Ployz runs on Linux servers only", kernel)
	}
	arch, ok := Arches[machine]
	if !ok {
		return Platform{}, fmt.Errorf("server CPU: uname -m says %q; releases are built for x86_64 (amd64) and aarch64 (arm64)", machine)
	}
	osRelease := ""
	if len(lines) == 3 {
		osRelease = lines[2]
	}
	distro, err := checkDistro(osRelease)
	if err != nil {
		return Platform{}, err
	}
	return Platform{OS: "linux", Arch: arch, Distro: distro}, nil
}

// checkDistro reads /etc/os-release and refuses a distribution outside
// supportedDistros, naming it.
func checkDistro(osRelease string) (string, error) {
	fields := map[string]string{}
	sc := bufio.NewScanner(strings.NewReader(osRelease))
	for sc.Scan() {
		k, v, ok := strings.Cut(strings.TrimSpace(sc.Text()), "=")
		if ok {
			fields[k] = strings.Trim(v, `"'`)
		}
	}
	if fields["ID"] == "" {
		return "", fmt.Errorf("server OS: no ID in /etc/os-release; Ployz installs on %s", strings.Join(supportedDistros, ", "))
	}
	name := fields["PRETTY_NAME"]
	if name == "" {
		name = fields["ID"] + " " + fields["VERSION_ID"]
	}
	ids := append([]string{fields["ID"]}, strings.Fields(fields["ID_LIKE"])...)
	for _, id := range ids {
		if slices.Contains(supportedDistros, id) {
			return name, nil
		}
	}
	return "", fmt.Errorf("server OS: /etc/os-release says %q (ID=%s); Ployz installs on %s and their derivatives", name, fields["ID"], strings.Join(supportedDistros, ", "))
}
