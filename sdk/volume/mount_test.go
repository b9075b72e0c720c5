package volume

import "testing"

func TestMountedVolume(t *testing.T) {
	for _, c := range []struct {
		src, name string
		ok        bool
	}{
		{"/var/lib/ployz/volumes/db", "db", true},
		{"/var/lib/ployz/volumes/db/", "db", true},
		{"/var/lib/ployz/volumes/db/pg/data", "db", true},
		{"/var/lib/ployz/volumes/./db/../web", "web", true},
		{"/var/lib/ployz/volumes", "", true},
		{"/var/lib/ployz/volumes-other/db", "", false},
		{"/var/lib/ployz/volumes/../state", "", false},
		{"/srv/data", "", false},
		{"var/lib/ployz/volumes/db", "", false},
		{"./data", "", false},
	} {
		name, ok := MountedVolume(c.src)
		if name != c.name || ok != c.ok {
			t.Errorf("MountedVolume(%q) = %q, %v; want %q, %v", c.src, name, ok, c.name, c.ok)
		}
	}
}
