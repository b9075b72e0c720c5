// Package pluginv1 is the Go code generated from plugin.proto: the base contract every Ployz plugin answers, whatever its kind.
// Regenerate it with `make proto`; `make lint` checks it is current.
package pluginv1
