package rpc

import "testing"

func TestAcceptsAndRoles(t *testing.T) {
	if !Accepts(nil, AcceptServices) || !Accepts(map[string]string{"x": "y"}, AcceptBuilds) {
		t.Fatal("a Machine without ployz.accepts must accept every kind")
	}
	l := map[string]string{MachineLabelAccepts: "ingress, builds", MachineLabelRolePrefix + "db": ""}
	if Accepts(l, AcceptServices) || !Accepts(l, AcceptIngress) || !Accepts(l, AcceptBuilds) {
		t.Fatalf("accepts of %v wrong", l)
	}
	if !Accepts(l, AcceptBuilds) || !HasRole(l, "db") || HasRole(l, "web") {
		t.Fatal("roles wrong")
	}
	if v, err := ParseAccepts([]string{"services,ingress", "services"}); err != nil || v != "ingress,services" {
		t.Fatalf("ParseAccepts: %q %v", v, err)
	}
	if _, err := ParseAccepts([]string{"gpus"}); err == nil {
		t.Fatal("an unknown kind must be refused")
	}
	for _, bad := range []string{"", "DB", "a b", "-x"} {
		if ValidRole(bad) == nil {
			t.Fatalf("role %q accepted", bad)
		}
	}
}
