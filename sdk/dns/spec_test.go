package dns

import (
	"strings"
	"testing"
)

const goodSpec = `{"machine":"m1","listen":"10.210.1.1:53","subnet":"10.210.1.0/24",
 "upstreams":["1.1.1.1","9.9.9.9:5353"],"store_api":"127.0.0.1:7571","store_token_file":"/var/lib/ployz/store/token"}`

func TestParseSpecIgnoresUnknownFields(t *testing.T) {
	c, err := ParseSpec([]byte(strings.Replace(goodSpec, `{`, `{"from_the_future":{"x":[1,2]},"region":"eu",`, 1)))
	if err != nil {
		t.Fatal(err)
	}
	if c.Machine != "m1" || c.ListenAddr.String() != "10.210.1.1:53" || c.SubnetPrefix.String() != "10.210.1.0/24" ||
		len(c.UpstreamAddrs) != 2 || c.TrustedMachinesFile != "" || c.UpstreamAddrs[0].String() != "1.1.1.1:53" || c.UpstreamAddrs[1].String() != "9.9.9.9:5353" {
		t.Fatalf("%+v", c)
	}
}

func TestParseSpecMalformedNamesTheField(t *testing.T) {
	cases := map[string]string{
		`{"machine":"","listen":"10.210.1.1:53","subnet":"10.210.1.0/24","store_api":"127.0.0.1:7571"}`:                                     `"machine"`,
		`{"machine":"m1","listen":"10.210.1.1","subnet":"10.210.1.0/24","store_api":"127.0.0.1:7571"}`:                                      `"listen"`,
		`{"machine":"m1","listen":"10.210.9.1:53","subnet":"10.210.1.0/24","store_api":"127.0.0.1:7571"}`:                                   `"listen"`,
		`{"machine":"m1","listen":"10.210.1.1:53","subnet":"fd00::/64","store_api":"127.0.0.1:7571"}`:                                       `"subnet"`,
		`{"machine":"m1","listen":"10.210.1.1:53","subnet":"10.210.1.0/24","store_api":"nope"}`:                                             `"store_api"`,
		`{"machine":"m1","listen":"10.210.1.1:53","subnet":"10.210.1.0/24","store_api":"127.0.0.1:1","upstreams":["8.8.8.8","dns.google"]}`: `"upstreams[1]"`,
		`{"machine":"m1","listen":"10.210.1.1:53","subnet":"10.210.1.0/24","store_api":"127.0.0.1:1","trusted_machines_file":"run/t.json"}`: `"trusted_machines_file"`,
		`{"machine":"m1","listen":53}`: `listen`,
		`not json`:                     `dns spec`,
	}
	for in, want := range cases {
		_, err := ParseSpec([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("ParseSpec(%s) = %v, want an error naming %s", in, err, want)
		}
	}
}

func TestParseSpecTrustedMachinesFile(t *testing.T) {
	c, err := ParseSpec([]byte(strings.Replace(goodSpec, `{`, `{"trusted_machines_file":"/run/ployz/trusted-machines.json",`, 1)))
	if err != nil || c.TrustedMachinesFile != "/run/ployz/trusted-machines.json" {
		t.Fatalf("%+v %v", c, err)
	}
}
