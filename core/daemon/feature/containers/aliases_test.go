package containers

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/docker/docker/api/types/container"

	"github.com/ployz/ployz/core/rpc"
)

// TestValidateNetworksRefusesBadAliases: an alias must be on a network
// the Container is on and be one lowercase DNS label; the refusal names
// the field.
func TestValidateNetworksRefusesBadAliases(t *testing.T) {
	base := rpc.ContainerSpec{Namespace: "shop-prod", Service: "web", Image: "x"}
	ok := base
	ok.Networks = []string{"external:payments", "shop-prod"}
	ok.Aliases = map[string][]string{"external:payments": {"pay", "shop-api"}, "shop-prod": {"api"}}
	if err := validateNetworks(ok); err != nil {
		t.Fatalf("valid aliases refused: %v", err)
	}
	def := base
	def.Aliases = map[string][]string{"shop-prod": {"api"}} // the default network, Networks nil
	if err := validateNetworks(def); err != nil {
		t.Fatalf("alias on the default network refused: %v", err)
	}
	for field, aliases := range map[string]map[string][]string{
		`spec.aliases["shop-prod/back"]`: {"shop-prod/back": {"api"}},   // not on it
		`spec.aliases["other-prod"]`:     {"other-prod": {"api"}},       // another namespace's
		`spec.aliases["shop-prod"][1]`:   {"shop-prod": {"api", "Api"}}, // upper case
		`spec.aliases["shop-prod"][0]`:   {"shop-prod": {"db.local"}},   // two labels
	} {
		s := base
		s.Aliases = aliases
		err := validateNetworks(s)
		if err == nil || !strings.Contains(err.Error(), field) {
			t.Errorf("%v: err = %v, want it to name %s", aliases, err, field)
		}
	}
}

// TestContainerRowCarriesAliases: the row carries the spec's aliases by
// network, as sdk/store's fixture pins them.
func TestContainerRowCarriesAliases(t *testing.T) {
	ob := rpc.ContainerObservation{Namespace: "shop-prod", Service: "api", Ready: true,
		Spec: &rpc.ContainerSpec{Networks: []string{"external:payments", "shop-prod"},
			Aliases: map[string][]string{"external:payments": {"pay"}}}}
	b := ServiceRow(ob, container.InspectResponse{})
	raw, _ := json.Marshal(b)
	if !strings.Contains(string(raw), `"networks":["external:payments","shop-prod"],"aliases":{"external:payments":["pay"]}`) {
		t.Fatalf("row JSON %s", raw)
	}
	if got := b.NetworkAliases(); len(got) != 1 || got["external:payments"][0] != "pay" {
		t.Fatalf("row aliases %v", got)
	}
}
