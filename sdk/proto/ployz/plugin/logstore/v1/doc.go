// Package logstorev1 is the Go code generated from logstore.proto: the service a "logstore" kind plugin serves (the Log Store).
// Regenerate it with `make proto`; `make lint` checks it is current.
package logstorev1
