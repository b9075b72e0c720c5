package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/hashicorp/go-hclog"
)

// MemberDown is the state of a member this node's SWIM view declared
// dead or that left; the other states are "up" and "suspect".
const MemberDown = "down"

// Member is one other member in this node's SWIM view: its store site
// (a Machine record's store_site) and its state.
type Member struct {
	Site  string `json:"site"`
	State string `json:"state"`
}

// Membership is the answer of GET /v1/membership.
type Membership struct {
	Members []Member `json:"members"`
	// Waits says the store holds a request with wait= until the down
	// sites change (MembershipChange); older stores answer at once.
	Waits bool `json:"waits,omitempty"`
}

// ErrNoMembership means the store does not answer membership (a store from
// before it, or another Corrosion-compatible store).
var ErrNoMembership = errors.New("the store API has no membership view")

// Membership reads the store's SWIM view of the other members.
func (c *Client) Membership(ctx context.Context) (Membership, error) {
	return c.membership(ctx, "/v1/membership")
}

// MembershipChange reads the view once the sites it holds down differ
// from down (a DownKey) or wait passes; a store whose answer lacks Waits
// answered at once.
func (c *Client) MembershipChange(ctx context.Context, down string, wait time.Duration) (Membership, error) {
	q := url.Values{"down": {down}, "wait": {wait.String()}}
	return c.membership(ctx, "/v1/membership?"+q.Encode())
}

func (c *Client) membership(ctx context.Context, path string) (Membership, error) {
	var m Membership
	resp, err := c.do(ctx, http.MethodGet, path, nil)
	if err != nil {
		var api *APIError
		if errors.As(err, &api) && (api.Status == http.StatusNotFound || api.Status == http.StatusMethodNotAllowed) {
			return m, ErrNoMembership
		}
		return m, err
	}
	defer closeBody(resp.Body)
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return m, fmt.Errorf("store API membership: %w", err)
	}
	return m, nil
}

// DownKey is the sorted, comma-separated sites the view holds down.
func (m Membership) DownKey() string {
	return strings.Join(slices.Sorted(maps.Keys(m.DownSites())), ",")
}

// DownSites is the set of sites the view holds down.
func (m Membership) DownSites() map[string]bool {
	out := map[string]bool{}
	for _, x := range m.Members {
		if x.State == MemberDown {
			out[x.Site] = true
		}
	}
	return out
}

// FollowMembership wakes the watch whenever the set of members the store
// holds down changes, until ctx ends: a Machine going down changes no
// row, yet what a reader of the rows serves depends on it. A store that
// waits (Membership.Waits) holds each read until the set changes or
// membershipWait passes, so an idle reader asks about twice a minute;
// one that does not is read every interval. A store without a membership
// view (ErrNoMembership: one from before it, until the Machine's upgrade
// replaces it) is asked again only every withoutViewEvery.
func (w *Watch) FollowMembership(ctx context.Context, do func(f func(*Client) error) error, every time.Duration, log hclog.Logger) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	// Read the tunables here, not in the loop: a test that restores them
	// when it ends must not race a loop still finishing its last read.
	hold, noViewEvery := membershipWait, withoutViewEvery
	go func() {
		var last string
		noView := false
		for {
			var m Membership
			asked := time.Now()
			err := do(func(c *Client) error {
				var err error
				m, err = c.MembershipChange(ctx, last, hold)
				return err
			})
			wait := every
			switch {
			case errors.Is(err, ErrNoMembership):
				if !noView {
					log.Info("the store answers no membership: Machines it holds down are not left out", "asking again every", noViewEvery)
				}
				noView, wait = true, noViewEvery
			case err == nil:
				noView = false
				k := m.DownKey()
				// A store that waits held the read until a change or
				// its end: ask again at once. One that answered early
				// with nothing changed is paced as if it did not wait.
				if m.Waits && (k != last || time.Since(asked) >= every) {
					wait = 0
				}
				if k != last {
					last = k
					w.wake()
				}
			}
			if wait == 0 {
				if ctx.Err() != nil {
					return
				}
				continue
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// membershipWait is how long FollowMembership asks a waiting store to
// hold a read (a variable for tests).
var membershipWait = 25 * time.Second

// withoutViewEvery is how often FollowMembership asks a store that had
// no membership view (a variable for tests).
var withoutViewEvery = 30 * time.Second
