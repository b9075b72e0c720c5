// Package packaging carries the files that install Ployz on a Machine: the
// systemd units and the lab Machine image recipe. They are embedded so the
// ployz binary can build a lab or install a Machine without the repository.
package packaging

import "embed"

// Files holds lab/ (the lab Machine image recipe), labvm/ (its VM
// variant: kernel, udev, ZFS) and systemd/ (units).
//
//go:embed lab labvm systemd
var Files embed.FS
