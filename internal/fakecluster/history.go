package fakecluster

import (
	"maps"
	"slices"

	"github.com/ployz/ployz/core/rpc"
)

// historyRoutes answer record_history and list_history from one table
// every Machine shares, as the replicated one is, checking requests as a
// Machine does.
func (fc *Cluster) historyRoutes(srv *rpc.Server, m *Machine) {
	HandleMethod(fc, srv, m, rpc.RecordHistory, valid(func(req rpc.RecordHistoryRequest) (rpc.HistoryRecorded, error) {
		req.Entry.RecordedBy = m.id
		fc.history[req.Entry.ID] = req.Entry
		return rpc.HistoryRecorded{ID: req.Entry.ID}, nil
	}))
	HandleMethod(fc, srv, m, rpc.ListHistory, valid(func(req rpc.ListHistoryRequest) (rpc.HistoryList, error) {
		return rpc.HistoryList{Entries: req.Select(slices.Collect(maps.Values(fc.history)))}, nil
	}))
}

// History is every entry recorded, newest first.
func (fc *Cluster) History() []rpc.HistoryEntry {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return rpc.ListHistoryRequest{Limit: rpc.HistoryMaxLimit}.Select(slices.Collect(maps.Values(fc.history)))
}
