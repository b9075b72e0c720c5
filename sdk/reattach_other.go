//go:build !linux

package sdk

import "context"

// waitExit has no pidfd outside Linux: the caller polls.
func waitExit(context.Context, int, <-chan struct{}) (bool, error) { return false, nil }
