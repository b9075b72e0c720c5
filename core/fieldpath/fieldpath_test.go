package fieldpath

import (
	"encoding/json"
	"net/netip"
	"testing"
)

type peer struct {
	Name   string       `json:"name"`
	Subnet netip.Prefix `json:"subnet"`
}

type inner struct {
	Deep int `json:"deep"`
}

type record struct {
	ID     string           `json:"id"`
	Peers  []peer           `json:"peers"`
	Votes  map[string]int64 `json:"votes"`
	Inner  *inner           `json:"inner"`
	NoTag  int
	Hidden string `json:"-"`
	inner
}

func TestLocate(t *testing.T) {
	for _, tc := range []struct{ doc, want string }{
		{`{"id":"a","peers":[{"name":"m1","subnet":"10.0.0.0/24"},{"subnet":"nope"}]}`, "peers[1].subnet"},
		{`{"peers":[{"name":7}]}`, "peers[0].name"},
		{`{"votes":{"a":1,"b":"x"}}`, "votes.b"},
		{`{"inner":{"deep":"x"}}`, "inner.deep"},
		{`{"deep":"x"}`, "deep"},
		{`{"NoTag":"x"}`, "NoTag"},
		{`{"notag":"x"}`, "notag"},
		{`{"ID":5}`, "ID"},
		{`{"unknown":{"x":1},"id":[]}`, "id"},
		{`{"Hidden":5}`, ""},
		{`[1,2]`, ""},
		{`{"id":"ok"}`, ""},
	} {
		var r record
		err := json.Unmarshal([]byte(tc.doc), &r)
		if got := Locate([]byte(tc.doc), &r); got != tc.want {
			t.Errorf("%s: located %q, want %q (decode error %v)", tc.doc, got, tc.want, err)
		}
	}
	if got := Locate([]byte(`[{"subnet":"x"}]`), []peer{}); got != "[0].subnet" {
		t.Errorf("a top-level array: %q", got)
	}
}
