// Package volumev1 is the Go code generated from volume.proto: the service a "volume" kind plugin serves (Provisioned Volumes).
// Regenerate it with `make proto`; `make lint` checks it is current.
package volumev1
