package serving

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"slices"
	"strings"
	"time"

	"github.com/ployz/ployz/core/machine"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/store"
)

// pointerRowWait bounds how long move_serving_pointer waits for the rows
// of the Containers it names to replicate to the entry.
const pointerRowWait = 10 * time.Second

// moveServingPointer writes a Service's Serving Pointer to the store,
// naming each Container with the image and deployment its row reports.
func (f *Feature) moveServingPointer(ctx context.Context, req rpc.MoveServingPointerRequest) (rpc.ServingPointerMoved, error) {
	if err := req.Validate(); err != nil {
		return rpc.ServingPointerMoved{}, err
	}
	st, err := f.host.Store()
	if err != nil {
		return rpc.ServingPointerMoved{}, err
	}
	key := strings.ToLower(req.Service)
	if req.Delete {
		if _, err := st.Serving().Delete(ctx, key); err != nil {
			return rpc.ServingPointerMoved{}, rpc.Errorf(rpc.CodeUnavailable, "delete serving pointer: %v", err)
		}
		return rpc.ServingPointerMoved{}, nil
	}
	rows, err := f.pointerRows(ctx, st, req.Containers)
	if err != nil {
		return rpc.ServingPointerMoved{}, err
	}
	body := store.ServingBody{ID: newPointerID(), Deployment: req.Deployment, MovedAt: time.Now().UnixMilli()}
	out := rpc.ServingPointerMoved{ID: body.ID}
	for _, c := range req.Containers {
		sc := store.ServingContainer{ID: c.ID, Machine: c.MachineID, ImageID: c.ImageID, Deployment: c.Deployment}
		if r, ok := rows[c.ID]; ok && r.Owner == c.MachineID {
			sc.ImageID, sc.Deployment = r.Body.ImageID, r.Body.Deployment
		} else {
			out.Unseen = append(out.Unseen, c.ID)
		}
		body.Containers = append(body.Containers, sc)
		out.Containers = append(out.Containers, rpc.ServingContainer{ID: sc.ID, MachineID: sc.Machine, ImageID: sc.ImageID, Deployment: sc.Deployment})
	}
	if _, err := st.Serving().Put(ctx, store.Row[store.ServingBody]{Key: key, Owner: f.host.MachineID(), Body: body}); err != nil {
		return rpc.ServingPointerMoved{}, rpc.Errorf(rpc.CodeUnavailable, "write serving pointer: %v", err)
	}
	f.log.Info("serving pointer moved", "service", key, "pointer", body.ID, "containers", len(body.Containers), "unseen", len(out.Unseen))
	return out, nil
}

// pointerRows reads the rows of the named Containers by key, waiting up
// to pointerRowWait for those not replicated here yet: woken by a
// subscription to exactly those rows, and re-reading on a short period
// while it is not open.
func (f *Feature) pointerRows(ctx context.Context, st *store.Client, cs []rpc.ServingContainer) (map[string]store.Row[store.ContainerBody], error) {
	rows := map[string]store.Row[store.ContainerBody]{}
	var w *store.Watch
	deadline := time.NewTimer(pointerRowWait)
	defer deadline.Stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	for {
		missing := unseen(cs, rows)
		for _, id := range missing {
			r, ok, err := st.Containers().Get(ctx, id)
			if err != nil {
				return nil, rpc.Errorf(rpc.CodeUnavailable, "read containers: %v", err)
			}
			if ok {
				rows[id] = r
			}
		}
		if missing = unseen(cs, rows); len(missing) == 0 {
			return rows, nil
		}
		if w == nil && hexIDs(missing) {
			w = f.host.WatchStore(wctx, `SELECT id, owner FROM containers WHERE id IN ('`+strings.Join(missing, "','")+`')`)
		}
		var woke <-chan struct{}
		if w != nil {
			woke = w.C
		}
		select {
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-deadline.C:
			return rows, nil
		case <-woke:
		case <-time.After(rowPoll(w)):
		}
	}
}

// rowPoll is how often pointerRows re-reads: often while its
// subscription is not open, as a net under it once it is.
func rowPoll(w *store.Watch) time.Duration {
	if w != nil && w.Live() {
		return time.Second
	}
	return 100 * time.Millisecond
}

// hexIDs reports whether every id is a Docker id (hex), so they may be
// written into a subscription's SQL.
func hexIDs(ids []string) bool {
	for _, id := range ids {
		if id == "" || strings.Trim(id, "0123456789abcdef") != "" {
			return false
		}
	}
	return true
}

// unseen lists the named Containers without a row from their Machine
// (identity is fixed at creation, so a row that exists tells it).
func unseen(cs []rpc.ServingContainer, rows map[string]store.Row[store.ContainerBody]) []string {
	var out []string
	for _, c := range cs {
		if r, ok := rows[c.ID]; !ok || r.Owner != c.MachineID {
			out = append(out, c.ID)
		}
	}
	return out
}

func newPointerID() string {
	b := make([]byte, 6)
	rand.Read(b) // crypto/rand never fails on Linux
	return hex.EncodeToString(b)
}

// View is what the store says about pointers and acks, joined with
// this Machine's membership view. The retire loop reads its acks (Acks)
// to tell when a superseded Container may stop.
type View struct {
	pointers map[string]store.ServingBody
	acks     []rpc.ServingAck // one per participating Machine, Acked empty
	acked    map[string]map[string]string
}

func (f *Feature) readServing(ctx context.Context, st *store.Client) (View, error) {
	v := View{acked: map[string]map[string]string{}}
	var err error
	if v.pointers, err = ReadPointers(ctx, st); err != nil {
		return v, err
	}
	return v, f.readAcks(ctx, st, &v)
}

// ReadPointers reads the Serving Pointers, keyed by lowercase Service.
func ReadPointers(ctx context.Context, st *store.Client) (map[string]store.ServingBody, error) {
	ps, err := st.Serving().List(ctx)
	if err != nil {
		return nil, err
	}
	out := make(map[string]store.ServingBody, len(ps))
	for _, p := range ps {
		out[strings.ToLower(p.Key)] = p.Body
	}
	return out, nil
}

// Acks reads the acks alone, as the retire loop needs them once
// something is superseded.
func (f *Feature) Acks(ctx context.Context, st *store.Client) (View, error) {
	v := View{acked: map[string]map[string]string{}}
	return v, f.readAcks(ctx, st, &v)
}

// readAcks fills v's acks: every participating Machine that runs an
// Ingress Proxy, with this Machine's membership view of it, and what each
// acked. A Machine whose own row says it does not accept ingress runs no
// proxy (its daemon withdrew it), so no ack of its is waited for.
func (f *Feature) readAcks(ctx context.Context, st *store.Client, v *View) error {
	as, err := st.ServingAcks().List(ctx)
	if err != nil {
		return err
	}
	for _, a := range as {
		v.acked[a.Key] = a.Body.Pointers
	}
	ms, err := st.Machines().List(ctx)
	if err != nil {
		return err
	}
	members := f.host.Members(ctx)
	self := f.host.MachineID()
	for _, m := range ms {
		if m.Body.Phase != string(machine.Participating) || !rpc.Accepts(m.Body.Labels, rpc.AcceptIngress) {
			continue
		}
		state := "unknown"
		if m.Key == self {
			state = "up"
		} else if mb, ok := members[m.Body.StoreSite]; ok && m.Body.StoreSite != "" {
			state = mb.State
		}
		v.acks = append(v.acks, rpc.ServingAck{MachineID: m.Key, Machine: m.Body.Name, Membership: state})
	}
	return nil
}

// AckedBy reports whether every participating Machine that is not Down
// acks pointer id of svc.
func (v View) AckedBy(svc, id string) bool {
	for _, a := range v.acks {
		if a.Membership != "down" && v.acked[a.MachineID][svc] != id {
			return false
		}
	}
	return true
}

// readServingWait reads the serving view; with req.WaitPointer it reads
// again on every change to the acks (or machines) until the pointer is
// acked by every Machine that is not Down, or the wait is over.
func (f *Feature) readServingWait(ctx context.Context, st *store.Client, req rpc.ServingStatusRequest) (View, error) {
	v, err := f.readServing(ctx, st)
	if err != nil || req.WaitPointer == "" {
		return v, err
	}
	key := strings.ToLower(req.Services[0])
	wait := 5 * time.Second
	if req.WaitSeconds > 0 {
		wait = min(time.Duration(req.WaitSeconds)*time.Second, time.Minute)
	}
	deadline := time.NewTimer(wait)
	defer deadline.Stop()
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	w := f.host.WatchStore(wctx, `SELECT id, body FROM serving_acks`, `SELECT id, body FROM machines`)
	for !v.AckedBy(key, req.WaitPointer) {
		select {
		case <-ctx.Done():
			return v, nil
		case <-deadline.C:
			return v, nil
		case <-w.C:
		case <-time.After(rowPoll(w)):
		}
		if v, err = f.readServing(ctx, st); err != nil {
			return v, err
		}
	}
	return v, nil
}

func (f *Feature) servingStatus(ctx context.Context, req rpc.ServingStatusRequest) (rpc.ServingStatus, error) {
	st, err := f.host.Store()
	if err != nil {
		return rpc.ServingStatus{}, err
	}
	if req.WaitPointer != "" && len(req.Services) != 1 {
		return rpc.ServingStatus{}, rpc.InvalidField("wait_pointer", "needs exactly one service")
	}
	if req.WaitSeconds < 0 {
		return rpc.ServingStatus{}, rpc.InvalidField("wait_seconds", "%d is negative", req.WaitSeconds)
	}
	v, err := f.readServingWait(ctx, st, req)
	if err != nil {
		return rpc.ServingStatus{}, rpc.Errorf(rpc.CodeUnavailable, "read serving pointers: %v", err)
	}
	names := req.Services
	if len(names) == 0 {
		for k := range v.pointers {
			names = append(names, k)
		}
		slices.Sort(names)
	}
	out := rpc.ServingStatus{ObserverID: f.host.MachineID(), Services: []rpc.ServiceServing{}}
	for _, n := range names {
		k := strings.ToLower(n)
		s := rpc.ServiceServing{Service: k}
		if p, ok := v.pointers[k]; ok {
			s.Pointer, s.Deployment = p.ID, p.Deployment
			for _, c := range p.Containers {
				s.Containers = append(s.Containers, rpc.ServingContainer{ID: c.ID, MachineID: c.Machine, ImageID: c.ImageID, Deployment: c.Deployment})
			}
		}
		for _, a := range v.acks {
			a.Acked = v.acked[a.MachineID][k]
			s.Acks = append(s.Acks, a)
		}
		out.Services = append(out.Services, s)
	}
	return out, nil
}
