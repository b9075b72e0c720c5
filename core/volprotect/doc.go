// Package volprotect is Volume protection on a schedule (docs/volumes.md,
// "Protection on a schedule"): the x-volume declaration of a Provisioned
// Volume (snapshot retention, a Mirror kept in Sync), the retention
// planner that says which automatic snapshots to keep for the hourly,
// daily and weekly buckets, and the Protector, the round ployzd runs on
// the Writer's Machine to take and prune them. It holds no ZFS and no
// RPC: its collaborators are interfaces, so a test clock and a fake
// volume drive it.
package volprotect
