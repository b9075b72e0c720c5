package store

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
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
}

// ErrNoMembership: the store does not answer membership (a store from
// before it, or another Corrosion-compatible store).
var ErrNoMembership = errors.New("the store API has no membership view")

// Membership reads the store's SWIM view of the other members.
func (c *Client) Membership(ctx context.Context) (Membership, error) {
	var m Membership
	resp, err := c.do(ctx, http.MethodGet, "/v1/membership", nil)
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
// holds down changes, reading the membership every interval until ctx
// ends: a Machine going down changes no row, yet what a reader of the
// rows serves depends on it. A store without a membership view
// (ErrNoMembership: one from before it, until the Machine's upgrade
// replaces it) is asked again only every withoutViewEvery.
func (w *Watch) FollowMembership(ctx context.Context, do func(f func(*Client) error) error, every time.Duration, log hclog.Logger) {
	if log == nil {
		log = hclog.NewNullLogger()
	}
	go func() {
		var last string
		noView := false
		for {
			var m Membership
			err := do(func(c *Client) error {
				var err error
				m, err = c.Membership(ctx)
				return err
			})
			wait := every
			switch {
			case errors.Is(err, ErrNoMembership):
				if !noView {
					log.Info("the store answers no membership: Machines it holds down are not left out", "asking again every", withoutViewEvery)
				}
				noView, wait = true, withoutViewEvery
			case err == nil:
				noView = false
				if k := strings.Join(slices.Sorted(maps.Keys(m.DownSites())), ","); k != last {
					last = k
					w.wake()
				}
			}
			select {
			case <-ctx.Done():
				return
			case <-time.After(wait):
			}
		}
	}()
}

// withoutViewEvery is how often FollowMembership asks a store that had
// no membership view (a variable for tests).
var withoutViewEvery = 30 * time.Second
