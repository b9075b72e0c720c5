// Package containers is the daemon's Service Container feature
// (docs/architecture.md): the Machine RPC commands that list, create,
// start, wait for, stop, remove and export Service Containers, exec and
// run_container streams, the readiness they report (healthcheck or
// sd_notify), socket activation, the files shipped with deploys, the
// Docker steps of volume tasks and job runs, and the reaper of one-off
// runs whose client is gone.
//
// The daemon admits each creation against fresh Machine facts (Facts)
// and otherwise does only what it is told; Docker is the only source of
// truth for what exists. The observe loop (ObserveLoop, observe.go)
// publishes this Machine's containers and volumes rows from Docker, each
// Service Container's as ServiceRow builds it, through Rows. Ops reaches
// the daemon only through Config (its Docker client, paths, Facts,
// Started, LogsHeld and Rows); the daemon's retire loop reads its Docker
// through the accessors in daemon.go.
package containers
