// Package history is the daemon's operator history feature:
// record_history and list_history over the replicated history table,
// written through whichever entry an operator reaches.
package history

import (
	"cmp"
	"context"

	"github.com/ployz/ployz/core/daemon/feature"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// Feature serves the history commands.
type Feature struct{ host feature.StoreHost }

// New returns the feature over host.
func New(host feature.StoreHost) *Feature { return &Feature{host: host} }

// Routes are record_history and list_history.
func (f *Feature) Routes() []rpc.Route {
	return []rpc.Route{
		rpc.Bind(rpc.RecordHistory, f.recordHistory),
		rpc.Bind(rpc.ListHistory, f.listHistory),
	}
}

// recordHistory writes one entry under its id; the same id again
// rewrites it (an operation's start, then its end).
func (f *Feature) recordHistory(ctx context.Context, req rpc.RecordHistoryRequest) (rpc.HistoryRecorded, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.HistoryRecorded{}, err
	}
	row := sdkstore.Row[store.HistoryBody]{Key: req.Entry.ID, Owner: f.host.MachineID(), Body: req.Entry.HistoryBody}
	if _, err := store.History(st).Put(ctx, row); err != nil {
		return rpc.HistoryRecorded{}, rpc.Errorf(rpc.CodeUnavailable, "write history: %v", err)
	}
	return rpc.HistoryRecorded{ID: req.Entry.ID}, nil
}

// listHistory answers the entries the request selects, newest first; the
// store selects them and Select orders them as every reader does.
func (f *Feature) listHistory(ctx context.Context, req rpc.ListHistoryRequest) (rpc.HistoryList, error) {
	st, err := feature.CheckedStore(f.host, req)
	if err != nil {
		return rpc.HistoryList{}, err
	}
	rows, err := store.HistoryNewest(ctx, st, req.Namespace, req.Kind, cmp.Or(req.Limit, rpc.HistoryDefaultLimit))
	if err != nil {
		return rpc.HistoryList{}, rpc.Errorf(rpc.CodeUnavailable, "read history: %v", err)
	}
	all := make([]rpc.HistoryEntry, 0, len(rows))
	for _, r := range rows {
		all = append(all, rpc.HistoryEntry{ID: r.Key, HistoryBody: r.Body, RecordedBy: r.Owner})
	}
	return rpc.HistoryList{Entries: req.Select(all)}, nil
}
