package proxy

import (
	"context"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/ployz/ployz/sdk/serving"
)

// Watcher is a Source that tells when its input may have changed, so
// Serve reads it then instead of polling often.
type Watcher interface {
	// Watch returns a channel that receives (coalesced) after any change
	// to what Input reads, until ctx ends; it also receives whenever the
	// watch itself was (re)established, since changes may have been missed.
	Watch(ctx context.Context, log hclog.Logger) <-chan struct{}
}

// SafetyPoll is how often Serve reads a Watcher's input with no change
// reported: a net under the subscriptions, not the way changes arrive.
const SafetyPoll = 10 * time.Second

// Watch implements Watcher: serving.Watch of what Input reads (the
// tables, the membership view and the trust list).
func (s StoreSource) Watch(ctx context.Context, log hclog.Logger) <-chan struct{} {
	return serving.Watch(ctx, s.tf.Do, s.bounds.TrustedFile, log).C
}

var _ Watcher = StoreSource{}
