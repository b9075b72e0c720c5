package operator

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
)

// historyWriteTimeout bounds one history write: an operation that ended
// (or was cancelled) still records how, but never hangs on it.
const historyWriteTimeout = 10 * time.Second

// History is the operator as a history entry names it.
func (o Operator) History() store.HistoryOperator {
	return store.HistoryOperator{Name: o.Name, KeyFingerprint: o.KeyFingerprint}
}

// NewHistoryID mints a history entry's id: random, so two operators'
// entries never collide.
func NewHistoryID() string {
	var b [10]byte
	_, _ = rand.Read(b[:])
	return "h-" + hex.EncodeToString(b[:])
}

// RecordHistory writes e through the entry (record_history). It runs
// even when ctx was cancelled, so a cancelled operation is recorded as
// such, within historyWriteTimeout.
func RecordHistory(ctx context.Context, ent *rpc.Client, e rpc.HistoryEntry) error {
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), historyWriteTimeout)
	defer cancel()
	if err := rpc.InvokeInto(wctx, ent, rpc.Target{}, rpc.RecordHistory, rpc.RecordHistoryRequest{Entry: e}, nil); err != nil {
		return fmt.Errorf("history of this %s is not recorded in the Cluster: %w", e.Kind, err)
	}
	return nil
}

// HistoryOutcome is the outcome an operation that ended with err records:
// completed, cancelled (ctx was), partial (partial says err is) or
// failed.
func HistoryOutcome(ctx context.Context, err error, partial func(error) bool) string {
	switch {
	case err == nil:
		return rpc.OutcomeCompleted
	case ctx.Err() != nil:
		return rpc.OutcomeCancelled
	case partial != nil && partial(err):
		return rpc.OutcomePartial
	}
	return rpc.OutcomeFailed
}

// ShortDetail trims s to what a history entry carries.
func ShortDetail(s string) string {
	const max = 500
	if len(s) <= max {
		return s
	}
	cut := max
	for cut > 0 && s[cut]&0xC0 == 0x80 { // not inside a UTF-8 sequence
		cut--
	}
	return s[:cut] + "…"
}
