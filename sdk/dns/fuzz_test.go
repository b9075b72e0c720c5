package dns

import "testing"

func FuzzSpec(f *testing.F) {
	f.Add([]byte(goodSpec))
	f.Add([]byte(`{}`))
	f.Add([]byte(`{"machine":"m","listen":"10.0.0.1:53","subnet":"10.0.0.0/8","store_api":"h:1","upstreams":["::1"]}`))
	f.Add([]byte(`{"listen":"[::ffff:10.0.0.1]:53","subnet":"10.0.0.0/33"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, b []byte) {
		c, err := ParseSpec(b)
		if err != nil {
			return
		}
		// Whatever validates is servable: listen inside subnet, a port.
		if c.Machine == "" || !c.SubnetPrefix.Contains(c.ListenAddr.Addr()) || c.ListenAddr.Port() == 0 {
			t.Fatalf("accepted an unservable spec: %+v", c)
		}
	})
}
