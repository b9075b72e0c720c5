package deploy

import (
	"slices"
	"strings"
	"testing"
)

// TestLoadNetworks: a Service on the default network keeps a spec
// without networks (its hash unchanged); named networks are the
// namespace's own, an external one is shared by its name; aliases warn.
func TestLoadNetworks(t *testing.T) {
	app, err := load(t, `name: shop
networks:
  back: {}
  pay:
    external: true
    name: payments
services:
  web:
    image: x
  api:
    image: x
    networks: [default, back, pay]
  worker:
    image: x
    networks:
      back:
        aliases: [jobs]
`, "")
	if err != nil {
		t.Fatal(err)
	}
	ns := app.Namespace()
	want := map[string][]string{"web": nil, "api": {"external:payments", ns, ns + "/back"}, "worker": {ns + "/back"}}
	for _, svc := range app.Services {
		if got := svc.Spec.Networks; !slices.Equal(got, want[svc.Name]) {
			t.Errorf("%s: networks %q, want %q", svc.Name, got, want[svc.Name])
		}
	}
	if all := strings.Join(app.Warnings, "\n"); !strings.Contains(all, `service "worker": networks.back: aliases and addresses are ignored`) {
		t.Errorf("no warning for the alias:\n%s", all)
	}
}

func TestLoadRefusesBadNetworks(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"undeclared":    {"name: p\nservices:\n  web:\n    image: x\n    networks: [back]\n", "back"},
		"external name": {"name: p\nnetworks:\n  pay: {external: true, name: \"pay ments\"}\nservices:\n  web:\n    image: x\n    networks: [pay]\n", `networks.pay.name: "pay ments"`},
		"network name":  {"name: p\nnetworks:\n  Back: {}\nservices:\n  web:\n    image: x\n    networks: [Back]\n", `networks.Back: want lowercase`},
	} {
		_, err := load(t, c.yaml, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, c.want)
		}
	}
}
