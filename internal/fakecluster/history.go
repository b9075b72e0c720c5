package fakecluster

import (
	"encoding/json"
	"maps"
	"slices"

	"github.com/ployz/ployz/core/rpc"
)

// historyRoutes answer record_history and list_history from one table
// every Machine shares, as the replicated one is, checking requests as a
// Machine does.
func (fc *Cluster) historyRoutes(m *Machine, handle func(string, func(json.RawMessage) (any, error))) {
	handle(rpc.CmdRecordHistory, func(raw json.RawMessage) (any, error) {
		var req rpc.RecordHistoryRequest
		if err := decodeValid(rpc.CmdRecordHistory, raw, &req); err != nil {
			return nil, err
		}
		req.Entry.RecordedBy = m.id
		fc.history[req.Entry.ID] = req.Entry
		return rpc.HistoryRecorded{ID: req.Entry.ID}, nil
	})
	handle(rpc.CmdListHistory, func(raw json.RawMessage) (any, error) {
		var req rpc.ListHistoryRequest
		if err := decodeValid(rpc.CmdListHistory, raw, &req); err != nil {
			return nil, err
		}
		return rpc.HistoryList{Entries: req.Select(slices.Collect(maps.Values(fc.history)))}, nil
	})
}

// History is every entry recorded, newest first.
func (fc *Cluster) History() []rpc.HistoryEntry {
	fc.mu.Lock()
	defer fc.mu.Unlock()
	return rpc.ListHistoryRequest{Limit: rpc.HistoryMaxLimit}.Select(slices.Collect(maps.Values(fc.history)))
}
