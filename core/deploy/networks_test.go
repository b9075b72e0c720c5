package deploy

import (
	"reflect"
	"slices"
	"strings"
	"testing"
)

// TestLoadNetworks: a Service on the default network keeps a spec
// without networks (its hash unchanged); named networks are the
// namespace's own, an external one is shared by its name; aliases are
// kept by isolation network, lowercased, sorted and once each; addresses
// warn.
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
    networks:
      default: {aliases: [shop-api]}
      back:
      pay: {aliases: [Pay-API]}
  worker:
    image: x
    networks:
      back:
        aliases: [queue, jobs, queue]
        ipv4_address: 10.1.2.3
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
	wantAliases := map[string]map[string][]string{"web": nil, "api": {"external:payments": {"pay-api"}, ns: {"shop-api"}},
		"worker": {ns + "/back": {"jobs", "queue"}}}
	for _, svc := range app.Services {
		if got := svc.Spec.Aliases; !reflect.DeepEqual(got, wantAliases[svc.Name]) {
			t.Errorf("%s: aliases %q, want %q", svc.Name, got, wantAliases[svc.Name])
		}
	}
	if all := strings.Join(app.Warnings, "\n"); !strings.Contains(all, `service "worker": networks.back: addresses are ignored`) || strings.Contains(all, "alias") {
		t.Errorf("want a warning for the address alone:\n%s", all)
	}
}

func TestLoadRefusesBadNetworks(t *testing.T) {
	for name, c := range map[string]struct{ yaml, want string }{
		"undeclared":    {"name: p\nservices:\n  web:\n    image: x\n    networks: [back]\n", "back"},
		"external name": {"name: p\nnetworks:\n  pay: {external: true, name: \"pay ments\"}\nservices:\n  web:\n    image: x\n    networks: [pay]\n", `networks.pay.name: "pay ments"`},
		"network name":  {"name: p\nnetworks:\n  Back: {}\nservices:\n  web:\n    image: x\n    networks: [Back]\n", `networks.Back: want lowercase`},
		"dotted alias":  {"name: p\nnetworks:\n  back: {}\nservices:\n  web:\n    image: x\n    networks:\n      back: {aliases: [api, db.local]}\n", `service "web": networks.back.aliases[1]: "db.local": want one DNS label`},
		"alias chars":   {"name: p\nservices:\n  web:\n    image: x\n    networks:\n      default: {aliases: [\"my_db\"]}\n", `networks.default.aliases[0]: "my_db"`},
		"empty alias":   {"name: p\nservices:\n  web:\n    image: x\n    networks:\n      default: {aliases: [\"\"]}\n", `networks.default.aliases[0]: ""`},
	} {
		_, err := load(t, c.yaml, "")
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: err = %v, want it to contain %q", name, err, c.want)
		}
	}
}
