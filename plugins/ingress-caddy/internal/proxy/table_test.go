package proxy

import (
	"errors"
	"slices"
	"testing"
	"time"
)

// TestUpstreamsOrderSpreads: successive requests start at successive
// upstreams within the local group; remote ones keep the route's order
// (see order); every order holds every upstream once, local ones first.
func TestUpstreamsOrderSpreads(t *testing.T) {
	for _, tc := range []struct {
		name  string
		dials []string
		local int
		first []string // the first upstream of successive orders
	}{
		{"remote only", []string{"r1", "r2", "r3"}, 0, []string{"r1", "r1", "r1"}},
		{"one local", []string{"l1", "r1", "r2"}, 1, []string{"l1", "l1", "l1"}},
		{"two local", []string{"l1", "l2", "r1"}, 2, []string{"l1", "l2", "l1"}},
		{"one upstream", []string{"r1"}, 0, []string{"r1", "r1"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u := upstreams{dials: tc.dials, local: tc.local}
			for i, want := range tc.first {
				got := u.order(time.Now())
				if got[0] != want {
					t.Fatalf("order %d: %v, want %s first", i, got, want)
				}
				if !slices.Equal(slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tc.dials))) {
					t.Fatalf("order %d: %v is not a permutation of %v", i, got, tc.dials)
				}
				for _, d := range got[:tc.local] {
					if !slices.Contains(tc.dials[:tc.local], d) {
						t.Fatalf("order %d: %v puts remote %s among the local ones", i, got, d)
					}
				}
			}
		})
	}
}

// TestUpstreamsOrderEjectedLast: an ejected upstream is tried last on
// every turn, even a local one.
func TestUpstreamsOrderEjectedLast(t *testing.T) {
	u := upstreams{dials: []string{"ej-l1", "ej-r1", "ej-r2"}, local: 1}
	eject("ej-l1", errors.New("refused"))
	eject("ej-r2", errors.New("refused"))
	t.Cleanup(func() { unEject("ej-l1"); unEject("ej-r2") })
	for range 3 {
		got := u.order(time.Now())
		if want := []string{"ej-r1", "ej-l1", "ej-r2"}; !slices.Equal(got, want) {
			t.Fatalf("order %v, want %v", got, want)
		}
	}
}
