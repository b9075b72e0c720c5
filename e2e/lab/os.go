package lab

import (
	"fmt"
	"slices"
	"strings"
)

// OS names a lab Machine operating system: a Debian release with that
// release's own Docker (docker.io), built by the same recipe.
type OS string

// The supported matrix's ends: what a server installed today runs, and
// the oldest release Ployz supports.
const (
	Debian13 OS = "debian13" // trixie, Docker 26
	Debian12 OS = "debian12" // bookworm, Docker 20.10 (the oldest supported)

	// DefaultOS is what users install today.
	DefaultOS = Debian13
)

// OSes lists every lab OS, the default first.
var OSes = []OS{Debian13, Debian12}

var suites = map[OS]string{Debian13: "trixie", Debian12: "bookworm"}

// suite returns the Debian suite debootstrap installs for o.
func (o OS) suite() (string, error) {
	if s, ok := suites[o]; ok {
		return s, nil
	}
	names := make([]string, len(OSes))
	for i, x := range OSes {
		names[i] = string(x)
	}
	return "", fmt.Errorf("os %q: use one of %s", string(o), strings.Join(names, ", "))
}

// ParseOS checks a name given on a command line.
func ParseOS(s string) (OS, error) {
	o := OS(s)
	if !slices.Contains(OSes, o) {
		_, err := o.suite()
		return "", err
	}
	return o, nil
}
