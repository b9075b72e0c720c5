// Package release is the Ployz release bundle: one versioned tar.gz per
// OS/arch holding ployzd, the plugin binaries shipped with it, the systemd
// units and a manifest (version, protocol major, os/arch, and the sha256
// and mode of every file). Write builds a bundle; Open and Extract read
// one back and verify every digest, and Check refuses a bundle meant for
// another OS, arch or protocol major, naming the field. The manifest is a
// stable format: fields are only added, readers ignore unknown ones
// (testdata/manifest-v1.json pins it).
//
// A bundle from a file or an upload is accepted only when signed by a
// release key the binary was built with (proof.go): its detached
// <bundle>.sig, or its release's signed index listing its digest.
//
// rollout.go holds the operator-side plan of `ployz machine upgrade`: one
// Machine at a time, stop at the first failure, an outcome per Machine.
package release
