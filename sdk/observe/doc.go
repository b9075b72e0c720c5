// Package observe is the contract of Ployz's Observe Store plugins: the
// logstore kind (a Machine's Container output, kept after the Container
// is removed) and the metrics kind. It names the capabilities they
// advertise, the spec they take through Configure, and the disk budget
// both share. The gRPC services are in sdk/proto/ployz/plugin/logstore/v1
// and sdk/proto/ployz/plugin/metrics/v1; docs/observe.md describes what
// users see and docs/plugins.md the rules for writing one.
package observe
