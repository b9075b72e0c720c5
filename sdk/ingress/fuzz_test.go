package ingress

import (
	"encoding/json"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// refusal is what every ParseSpec error looks like: a JSON error, or a
// named field with the reason.
var refusal = regexp.MustCompile(`^ingress spec: (field "(machine|listen|store_api|listen_tls|acme\.directory|acme\.ca_file|acme\.email|acme\.rank_delay_seconds|network)" |json: |unexpected end of JSON input|invalid character |cannot unmarshal |.*looking for beginning of value)`)

// FuzzParseSpec: ParseSpec never panics, refuses with a named field (or a
// JSON error), and what it accepts is usable and survives a round trip
// through its own encoding unchanged (defaults are filled once).
func FuzzParseSpec(f *testing.F) {
	f.Add([]byte(`{"machine":"m1","listen":":80","store_api":"127.0.0.1:7571"}`))
	f.Add([]byte(`{"machine":"m1","listen":":80","store_api":"127.0.0.1:7571","acme":{"directory":"https://acme.example/dir","email":"a@b.c","rank_delay_seconds":5}}`))
	f.Add([]byte(`{"machine":"m1","listen":":443","store_api":"h:1","acme":{"directory":"https://x/d"}}`))
	f.Add([]byte(`{"machine":"m1","listen":":80","store_api":"h:1","listen_tls":":8443"}`))
	f.Add([]byte(`{"machine":" ","listen":":0"}`))
	f.Add([]byte(`{"machine":"m","listen":"[::1]:80","store_api":"h:1","acme":{"directory":"http://x","ca_file":"rel"}}`))
	f.Add([]byte(`{"machine":"m1","listen":":80","store_api":"h:1","network":"10.210.0.0/16"}`))
	f.Add([]byte(`{"machine":"m1","listen":":80","store_api":"h:1","network":"fd00::/8"}`))
	f.Add([]byte(`null`))
	f.Add([]byte(`{"acme":null}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s, err := ParseSpec(b)
		if err != nil {
			if !refusal.MatchString(err.Error()) {
				t.Fatalf("refusal names no field: %v", err)
			}
			return
		}
		if strings.TrimSpace(s.Machine) == "" || s.StatusFile == "" || s.StateDir == "" {
			t.Fatalf("accepted without machine or defaults: %+v", s)
		}
		if s.ACME != nil && (s.ListenTLS == "" || s.ListenTLS == s.Listen || s.ACME.RankDelaySeconds <= 0) {
			t.Fatalf("accepted HTTPS without a usable TLS listener or rank delay: %+v %+v", s, *s.ACME)
		}
		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := ParseSpec(again)
		if err != nil {
			t.Fatalf("its own encoding is refused: %v\n%s", err, again)
		}
		if !reflect.DeepEqual(s, s2) {
			t.Fatalf("round trip changed the spec:\n%+v\n%+v", s, s2)
		}
	})
}
