// Package volume is the contract of Ployz's volume plugins (kind
// "volume"), which hold a Machine's Provisioned Volumes: the capabilities
// they advertise, the spec ployzd hands them through Configure (which
// pool to provision from), and the rules for volume and snapshot names
// and sizes that ployzd, the CLI and a plugin all check the same way. The
// gRPC service is in sdk/proto/ployz/plugin/volume/v1; docs/volumes.md
// describes what users see.
package volume
