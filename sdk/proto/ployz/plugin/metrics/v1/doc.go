// Package metricsv1 is the Go code generated from metrics.proto: the service a "metrics" kind plugin serves (Metric Samples and Rollups).
// Regenerate it with `make proto`; `make lint` checks it is current.
package metricsv1
