package daemon

import (
	"cmp"
	"context"
	"encoding/json"

	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/core/store"
	sdkstore "github.com/ployz/ployz/sdk/store"
)

// historyRoutes add record_history and list_history: the operator
// history lives in the replicated history table, written through
// whichever entry an operator reaches.
func (d *Daemon) historyRoutes() []rpc.Route {
	return []rpc.Route{
		{Command: rpc.CmdRecordHistory, Capability: rpc.CapRecordHistory, Handler: d.recordHistory},
		{Command: rpc.CmdListHistory, Capability: rpc.CapListHistory, Handler: d.listHistory},
	}
}

// recordHistory writes one entry under its id; the same id again
// rewrites it (an operation's start, then its end).
func (d *Daemon) recordHistory(ctx context.Context, raw json.RawMessage) (any, error) {
	var req rpc.RecordHistoryRequest
	if err := rpc.Decode(rpc.CmdRecordHistory, raw, &req); err != nil {
		return nil, err
	}
	st, err := d.checkedStore(req)
	if err != nil {
		return nil, err
	}
	row := sdkstore.Row[store.HistoryBody]{Key: req.Entry.ID, Owner: d.record().ID, Body: req.Entry.HistoryBody}
	if _, err := store.History(st).Put(ctx, row); err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "write history: %v", err)
	}
	return rpc.HistoryRecorded{ID: req.Entry.ID}, nil
}

// listHistory answers the entries the request selects, newest first; the
// store selects them and Select orders them as every reader does.
func (d *Daemon) listHistory(ctx context.Context, raw json.RawMessage) (any, error) {
	var req rpc.ListHistoryRequest
	if err := rpc.Decode(rpc.CmdListHistory, raw, &req); err != nil {
		return nil, err
	}
	st, err := d.checkedStore(req)
	if err != nil {
		return nil, err
	}
	rows, err := store.HistoryNewest(ctx, st, req.Namespace, req.Kind, cmp.Or(req.Limit, rpc.HistoryDefaultLimit))
	if err != nil {
		return nil, rpc.Errorf(rpc.CodeUnavailable, "read history: %v", err)
	}
	all := make([]rpc.HistoryEntry, 0, len(rows))
	for _, r := range rows {
		all = append(all, rpc.HistoryEntry{ID: r.Key, HistoryBody: r.Body, RecordedBy: r.Owner})
	}
	return rpc.HistoryList{Entries: req.Select(all)}, nil
}
