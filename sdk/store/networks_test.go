package store

import (
	"reflect"
	"testing"
)

// TestNetworkAliases: a row's aliases count only on networks it is on
// (its namespace's when it names none) and only as valid labels.
func TestNetworkAliases(t *testing.T) {
	b := ContainerBody{Namespace: "b", Networks: []string{"b", "external:payments", "a"},
		Aliases: map[string][]string{"external:payments": {"pay", "Bad", "-x"}, "a": {"steal"}, "b/back": {"back"}, "b": {"api"}}}
	if got := b.IsolationNetworks(); !reflect.DeepEqual(got, []string{"b", "external:payments"}) {
		t.Errorf("networks %v: another namespace's network counts", got)
	}
	want := map[string][]string{"external:payments": {"pay"}, "b": {"api"}}
	if got := b.NetworkAliases(); !reflect.DeepEqual(got, want) {
		t.Errorf("aliases %v, want %v", got, want)
	}
	def := ContainerBody{Namespace: "b", Aliases: map[string][]string{"b": {"api"}}}
	if got := def.NetworkAliases(); !reflect.DeepEqual(got, map[string][]string{"b": {"api"}}) {
		t.Errorf("default network aliases %v", got)
	}
	for a, ok := range map[string]bool{"api": true, "a-1": true, "": false, "a.b": false, "A": false, "-a": false, "a-": false,
		"abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abc": true, "abcdefghij0123456789abcdefghij0123456789abcdefghij0123456789abcd": false} {
		if ValidAlias(a) != ok {
			t.Errorf("ValidAlias(%q) = %v", a, !ok)
		}
	}
}
