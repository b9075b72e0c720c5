// Package metrics is the ployz-metrics plugin: every 10 seconds it reads
// this Machine's own Containers' cgroup and network counters and the
// Machine's CPU, memory, disk and network (file reads only: cgroup v1 and
// v2, /proc), keeps the raw Metric Samples 24 hours, folds each closed
// hour into 5-minute Rollups (min/avg/max/last) per Container, Service,
// Deployment and for the Machine, kept 90 days, and answers QueryMetrics.
// A value it could not read is a named gap, never a zero.
package metrics
