//go:build !linux

package serving

import "context"

// follow has no inotify outside Linux: the caller polls.
func (f *trustedFollower) follow(context.Context, func()) bool { return false }
