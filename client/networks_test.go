package client

import (
	"reflect"
	"testing"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
)

// TestServiceNetworks: a Service without compose networks is on its
// namespace's; an external network names every namespace declaring it,
// another namespace's own network of the same name does not count; the
// Service's aliases are listed on the network carrying them.
func TestServiceNetworks(t *testing.T) {
	svc := func(nets ...string) deploy.Service { return deploy.Service{Spec: rpc.ContainerSpec{Networks: nets}} }
	aliased := func(sv deploy.Service, n string, as ...string) deploy.Service {
		sv.Spec.Aliases = map[string][]string{n: as}
		return sv
	}
	declared := map[string]map[string]deploy.Service{
		"a-prod": {"web": aliased(svc("a-prod", "external:pay"), "external:pay", "shop"), "db": svc()},
		"b-prod": {"api": svc("b-prod", "external:pay"), "db": svc("b-prod/back")},
		"c-prod": {"web": svc()},
	}
	got := serviceNetworks(declared, "a-prod", "web")
	want := []ServiceNetwork{{Name: "a-prod", Namespaces: []string{"a-prod"}}, {Name: "external:pay", Namespaces: []string{"a-prod", "b-prod"}, Aliases: []string{"shop"}}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("a-prod web: %+v, want %+v", got, want)
	}
	if got := serviceNetworks(declared, "a-prod", "db"); !reflect.DeepEqual(got, []ServiceNetwork{{Name: "a-prod", Namespaces: []string{"a-prod"}}}) {
		t.Errorf("a-prod db: %+v", got)
	}
	if got := serviceNetworks(declared, "d-prod", "gone"); !reflect.DeepEqual(got, []ServiceNetwork{{Name: "d-prod", Namespaces: []string{"d-prod"}}}) {
		t.Errorf("undeclared Service: %+v", got)
	}
}
