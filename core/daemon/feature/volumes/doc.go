// Package volumes is the daemon's volume feature (docs/volumes.md): the
// Machine RPC that forwards the volume commands to the volume plugin
// (create, remove, list, inspect, snapshot, send, receive, send_volume_to,
// snapshot list and rollback), and ployzd's own commands over it: this
// Machine's copy records (set_volume_copy, volume_task), the Cluster's
// Volume Runs (begin/put/list_volume_runs) and volume policies, and the
// protect loop that takes and prunes scheduled snapshots where the
// Writer is.
//
// It reaches the daemon through Host; the Container admission asks it for
// the copy roles (CopyRoles), machine updates for a pool label's check
// (CheckPoolLabel), the serving-plugin loop for volume-zfs's spec (Spec).
package volumes
