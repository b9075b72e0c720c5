// Package logstore is the ployz-logstore plugin: it ingests the output of
// this Machine's Service Containers from Docker's local log driver files
// (package dockerlog), keeps it in its own store so it outlives the
// Container, and answers TailLogs and LogHistory.
//
// The store (under <state>/logs) is plain files, no database:
//
//	FORMAT                          the on-disk format version; another one is deleted
//	hours/<YYYYMMDDHH>/<id>.seg     one Container's lines logged in that UTC hour
//	containers.json                 what is known of each Container (name, Service, Deployment, first/last line)
//	cursors.json                    how far each Docker log file has been read
//	retention.json                  up to when lines were deleted, and why
//
// A segment is a run of records, each [len uint32][crc32 uint32][body]
// with body = [time_unix_nano int64][stream byte][line]; a torn or
// corrupt record ends the reading of that segment. Retention deletes
// whole hours past the age cap, and over the size cap the oldest chunk of
// the Container holding the most bytes, so one Container's flood does not
// evict the others' history.
package logstore
