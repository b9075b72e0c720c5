//go:build !linux

package fsutil

import "context"

// FollowFile has no inotify outside Linux: the caller polls.
func FollowFile(context.Context, string, func()) bool { return false }
