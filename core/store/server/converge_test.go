package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/core/store/crdt"
)

// model is an independent, in-memory statement of the merge rules: causal
// length per row, then per cell column version, value, site id. Feeding it
// every changeset any node produced gives the state every node must reach.
type model map[string]*modelRow

type modelCell struct {
	ver  int64
	val  crdt.Value
	site string
}

type modelRow struct {
	cl    int64
	cells map[string]modelCell
}

func modelLess(a, b crdt.Value) int {
	rank := func(v crdt.Value) int {
		switch v.K {
		case crdt.KindNull:
			return 0
		case crdt.KindInt, crdt.KindFloat:
			return 1
		case crdt.KindText:
			return 2
		}
		return 3
	}
	if ra, rb := rank(a), rank(b); ra != rb {
		return ra - rb
	}
	switch a.K {
	case crdt.KindInt:
		return int(a.I - b.I)
	case crdt.KindText:
		if a.S < b.S {
			return -1
		} else if a.S > b.S {
			return 1
		}
	}
	return 0
}

func (m model) apply(cs crdt.Changeset) {
	for pass := 0; pass < 2; pass++ { // existence first, then cells
		for _, ch := range cs.Changes {
			if (pass == 0) != (ch.Col == crdt.SentinelCol) {
				continue
			}
			r := m[ch.PK]
			if r == nil {
				r = &modelRow{cells: map[string]modelCell{}}
				m[ch.PK] = r
			}
			if ch.CL < r.cl {
				continue
			}
			if ch.CL > r.cl {
				r.cl, r.cells = ch.CL, map[string]modelCell{}
			}
			if ch.Col == crdt.SentinelCol || r.cl%2 == 0 {
				continue
			}
			cur, ok := r.cells[ch.Col]
			in := modelCell{ch.ColVersion, ch.Val, cs.Site}
			if !ok || in.ver > cur.ver || (in.ver == cur.ver && (modelLess(in.val, cur.val) > 0 ||
				(modelLess(in.val, cur.val) == 0 && in.site > cur.site))) {
				r.cells[ch.Col] = in
			}
		}
	}
}

func (m model) dump() []byte {
	var keys []string
	for pk, r := range m {
		if r.cl%2 == 1 {
			keys = append(keys, pk)
		}
	}
	sort.Slice(keys, func(i, j int) bool { return keyOf(keys[i]) < keyOf(keys[j]) })
	out := [][]any{}
	for _, pk := range keys {
		r := m[pk]
		v, n := r.cells["v"].val, r.cells["n"].val
		out = append(out, []any{keyOf(pk), v.Any(), n.Any()})
	}
	b, _ := json.Marshal(out)
	return b
}

func keyOf(pk string) string {
	var k []string
	_ = json.Unmarshal([]byte(pk), &k)
	return k[0]
}

// TestConvergenceUnderFaults runs random concurrent writes on every node
// while partitions, loss, delay and restarts come and go, then heals and
// checks every node holds byte-identical tables equal to the model.
func TestConvergenceUnderFaults(t *testing.T) {
	for _, tc := range []struct{ nodes, ops int }{{3, 3000}, {7, 3500}} {
		t.Run(fmt.Sprintf("%dnodes", tc.nodes), func(t *testing.T) {
			ops, dur := tc.ops, 4*time.Second
			if testing.Short() {
				ops, dur = ops/5, 2*time.Second
			}
			seed := time.Now().UnixNano()
			if s := os.Getenv("STORE_SEED"); s != "" {
				seed, _ = strconv.ParseInt(s, 10, 64)
			}
			t.Logf("seed %d (rerun with STORE_SEED=%d)", seed, seed)
			runConvergence(t, tc.nodes, ops, dur, seed)
		})
	}
}

// runConvergence spreads ops over roughly dur so faults keep changing
// while writes happen.
func runConvergence(t *testing.T, nodes, ops int, dur time.Duration, seed int64) {
	c := newTestCluster(t, nodes, seed, nil)
	rng := rand.New(rand.NewSource(seed))
	perNode := ops / nodes
	pace := dur / time.Duration(perNode)
	streams := make([]*rand.Rand, nodes)
	for i := range streams {
		streams[i] = rand.New(rand.NewSource(rng.Int63()))
	}
	faultRng := rand.New(rand.NewSource(rng.Int63()))
	done := make(chan struct{})
	var faultWG sync.WaitGroup
	faultWG.Add(1)
	restarts, partitions := 0, 0
	go func() {
		defer faultWG.Done()
		// The first events cover every fault kind; later ones are random.
		script := []int{0, 3, 1, 3, 2}
		for ev := 0; ; ev++ {
			select {
			case <-done:
				return
			case <-time.After(time.Duration(50+faultRng.Intn(150)) * time.Millisecond):
			}
			kind := faultRng.Intn(5)
			if ev < len(script) {
				kind = script[ev]
			}
			switch kind {
			case 0:
				perm := faultRng.Perm(nodes)
				cut := 1 + faultRng.Intn(nodes-1)
				var a, b []string
				for k, idx := range perm {
					if k < cut {
						a = append(a, c.addrs[idx])
					} else {
						b = append(b, c.addrs[idx])
					}
				}
				c.faults.Partition(a, b)
				partitions++
			case 1:
				c.faults.SetLoss(0.2, 30*time.Millisecond)
			case 2:
				c.faults.Heal()
			case 3:
				c.restart(faultRng.Intn(nodes))
				restarts++
			}
		}
	}()
	var wg sync.WaitGroup
	var errMu sync.Mutex
	var errs []error
	for i := 0; i < nodes; i++ {
		wg.Add(1)
		go func(i int, r *rand.Rand) {
			defer wg.Done()
			for k := 0; k < perNode; k++ {
				if err := c.exec(i, randomOp(r)...); err != nil {
					errMu.Lock()
					errs = append(errs, fmt.Errorf("node %d op %d: %w", i, k, err))
					errMu.Unlock()
				}
				time.Sleep(time.Duration(r.Int63n(int64(2 * pace))))
			}
		}(i, streams[i])
	}
	wg.Wait()
	close(done)
	faultWG.Wait()
	c.faults.Heal()
	for _, err := range errs {
		t.Error(err)
	}
	m := model{}
	c.capMu.Lock()
	for _, cs := range c.captured {
		m.apply(cs)
	}
	nCaptured := len(c.captured)
	c.capMu.Unlock()
	want := m.dump()
	healed := time.Now()
	deadline := healed.Add(45 * time.Second)
	for {
		var bad []string
		for i := 0; i < nodes; i++ {
			if got := dumpKV(t, c.node(i)); !bytes.Equal(got, want) {
				bad = append(bad, fmt.Sprintf("node %d (book %v):\n  got  %s", i, c.node(i).Engine().Book(), got))
			}
		}
		if len(bad) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no convergence 45s after healing (seed %d); model:\n  want %s\n%s", seed, want, strings.Join(bad, "\n"))
		}
		time.Sleep(50 * time.Millisecond)
	}
	var rows []any
	_ = json.Unmarshal(want, &rows)
	t.Logf("%d nodes, %d ops, %d changesets, %d partitions, %d restarts, %d live rows, converged %v after healing",
		nodes, perNode*nodes, nCaptured, partitions, restarts, len(rows), time.Since(healed).Round(time.Millisecond))
	if restarts == 0 || partitions == 0 {
		t.Fatalf("fault schedule too short: %d partitions, %d restarts", partitions, restarts)
	}
}

// randomOp draws one transaction over a small key space, so writes collide:
// upserts, updates, deletes, delete+re-insert, and multi-key transactions.
func randomOp(r *rand.Rand) []crdt.Stmt {
	key := func() string { return "k" + strconv.Itoa(r.Intn(24)) }
	val := func() string { return string(rune('a' + r.Intn(4))) }
	one := func() []crdt.Stmt {
		k := key()
		switch r.Intn(6) {
		case 0, 1:
			return []crdt.Stmt{{Query: `INSERT INTO kv(k, v, n) VALUES (?, ?, ?) ON CONFLICT(k) DO UPDATE SET v=excluded.v, n=excluded.n`,
				Args: []any{k, val(), int64(r.Intn(5))}}}
		case 2:
			return []crdt.Stmt{{Query: `UPDATE kv SET v=? WHERE k=?`, Args: []any{val(), k}}}
		case 3:
			return []crdt.Stmt{{Query: `UPDATE kv SET n=coalesce(n,0)+1 WHERE k=?`, Args: []any{k}}}
		case 4:
			return []crdt.Stmt{{Query: `DELETE FROM kv WHERE k=?`, Args: []any{k}}}
		default:
			return []crdt.Stmt{
				{Query: `DELETE FROM kv WHERE k=?`, Args: []any{k}},
				{Query: `INSERT INTO kv(k, v) VALUES (?, ?)`, Args: []any{k, val()}},
			}
		}
	}
	stmts := one()
	if r.Intn(8) == 0 {
		stmts = append(stmts, one()...)
	}
	return stmts
}
