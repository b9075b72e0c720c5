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
// truth for what exists. Ops reaches the daemon only through Config
// (its Docker client, paths, Facts, Started and LogsHeld); the daemon's
// observe and retire loops read it through the accessors in daemon.go,
// and publish each Container's row as ServiceRow builds it.
package containers
