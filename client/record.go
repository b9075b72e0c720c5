package client

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/operator"
)

// deployRecordEvery is how often a running Deploy's record is rewritten
// when steps changed it; heartbeatEvery when nothing did (well inside
// deploy.StaleAfter, so a reader can tell a dead CLI from a slow step).
const (
	deployRecordEvery = 500 * time.Millisecond
	heartbeatEvery    = 5 * time.Second
)

// deployRecord writes a running Deploy's record to the operator store
// as it goes, so `ployz deploy ls` and the dashboard (other processes on
// this computer) see its progress live and its per-Machine outcome after.
// A failed write warns once and never fails the Deploy.
type deployRecord struct {
	st     *operator.Store
	remote func(operator.DeployRow) error // the Cluster's copy (nil: none)
	ctx    string
	rec    *deploy.Recorder
	warn   func(error)
	warned bool
	stop   chan struct{}
	done   chan struct{}
}

func recordDeploy(st *operator.Store, ctxName string, p deploy.Plan, why string, warn func(error), remote func(operator.DeployRow) error) *deployRecord {
	d := &deployRecord{st: st, remote: remote, ctx: ctxName, rec: deploy.NewRecorder(p, why, time.Now()), warn: warn, stop: make(chan struct{}), done: make(chan struct{})}
	d.write(true)
	go d.loop()
	return d
}

func (s *Session) recordDeploy(p deploy.Plan, why string, h Hooks) *deployRecord {
	return recordDeploy(s.st, s.name, p, why, h.warn, s.remoteRecords(context.Background()))
}

func (d *deployRecord) loop() {
	defer close(d.done)
	t := time.NewTicker(deployRecordEvery)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-d.stop:
			return
		case <-t.C:
			if d.write(time.Since(last) >= heartbeatEvery) {
				last = time.Now()
			}
		}
	}
}

// write stores the record when it changed (or always); it reports
// whether it wrote.
func (d *deployRecord) write(always bool) bool {
	rec, changed := d.rec.Take(time.Now())
	if !changed && !always {
		return false
	}
	body, err := json.Marshal(rec)
	row := operator.DeployRow{Context: d.ctx, DeploymentID: rec.DeploymentID, Namespace: rec.Namespace, StartedAt: rec.StartedAt, UpdatedAt: rec.UpdatedAt, Body: body}
	if err == nil {
		err = d.st.SaveDeploy(row)
	}
	if err == nil && d.remote != nil {
		err = d.remote(row)
	}
	if err != nil && !d.warned {
		d.warned = true
		d.warn(fmt.Errorf("this deploy's record is not saved (ployz deploy ls and the dashboard will not show it): %w", err))
	}
	return true
}

// finish records the Outcome and writes the final record.
func (d *deployRecord) finish(o deploy.Outcome) {
	close(d.stop)
	<-d.done
	d.rec.Finish(o, time.Now())
	d.write(true)
}

// DeployRecords reads a context's newest Deploy records from the store
// (no Machine asked); a body this version cannot read is skipped with
// its id in skipped.
func DeployRecords(st *operator.Store, ctxName string, limit int) (recs []deploy.Record, skipped []string, err error) {
	rows, err := st.Deploys(ctxName, limit)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	for _, r := range rows {
		rec, err := deploy.ParseRecord(r.Body, now)
		if err != nil {
			skipped = append(skipped, r.DeploymentID)
			continue
		}
		recs = append(recs, rec)
	}
	return recs, skipped, nil
}

// DeployRecords is DeployRecords of the Session's context.
func (s *Session) DeployRecords(limit int) ([]deploy.Record, []string, error) {
	return DeployRecords(s.st, s.name, limit)
}
