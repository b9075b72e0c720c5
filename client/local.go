package client

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// ExecutableDir is where the running binary lives: make build puts every
// binary in bin/, so its siblings (ployz-lab, and the bundle enroll
// installs) are found there.
func ExecutableDir() string {
	exe, err := os.Executable()
	if err != nil {
		return "bin"
	}
	return filepath.Dir(exe)
}

// FindSibling finds the program name beside the running binary, or else
// on PATH; what says where it is looked for (in the error).
func FindSibling(name, what string) (string, error) {
	p := filepath.Join(ExecutableDir(), name)
	if _, err := os.Stat(p); err == nil {
		return p, nil
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return "", fmt.Errorf("%s beside ployz or on PATH (%s): %w", name, what, err)
	}
	return p, nil
}

// Environ is this process's environment as a map, for the interpolation
// of a compose file (DeployRequest.Env).
func Environ() map[string]string {
	m := map[string]string{}
	for _, kv := range os.Environ() {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
