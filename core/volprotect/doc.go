// Package volprotect is Volume protection on a schedule (docs/volumes.md,
// "Protection on a schedule"): the x-volume declaration of a Provisioned
// Volume (snapshot retention, a Mirror kept in Sync), the retention
// planner that says which automatic snapshots to keep for the hourly,
// daily and weekly buckets, the Protector, the round ployzd runs on
// the Writer's Machine to take and prune them, and each Mirror's last
// sync read from the Cluster's Volume Runs (Lags; `volume inspect` and
// the metrics). It holds no ZFS and no RPC: its collaborators are
// interfaces, so a test clock and a fake volume drive it.
package volprotect
