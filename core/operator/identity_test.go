package operator

import (
	"strings"
	"testing"
)

func TestOperatorName(t *testing.T) {
	t.Setenv(EnvOperator, "")
	s, _ := open(t)
	if err := s.SaveContext(Context{Name: "prod", Connections: []Connection{{URL: "ssh://root@10.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	def := DefaultOperatorName()
	if n, err := s.OperatorName("prod"); err != nil || n != def || !strings.Contains(def, "@") {
		t.Fatalf("default operator name %q (%v), want user@host %q", n, err, def)
	}
	if err := s.SetOperatorName("prod", "alice"); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.OperatorName("prod"); n != "alice" {
		t.Fatalf("saved name: %q", n)
	}
	t.Setenv(EnvOperator, "ci-job-42")
	if n, _ := s.OperatorName("prod"); n != "ci-job-42" {
		t.Fatalf("%s wins: %q", EnvOperator, n)
	}
	t.Setenv(EnvOperator, "")
	for _, bad := range []string{"x\x1b[31m", strings.Repeat("a", 129)} {
		if err := s.SetOperatorName("prod", bad); err == nil || !strings.Contains(err.Error(), "operator name") {
			t.Errorf("name %q accepted: %v", bad, err)
		}
	}
	if err := s.SetOperatorName("nope", "bob"); err == nil {
		t.Error("a name saved for a context that does not exist")
	}
	if err := s.RemoveContext("prod"); err != nil {
		t.Fatal(err)
	}
	if err := s.SaveContext(Context{Name: "prod", Connections: []Connection{{URL: "ssh://root@10.0.0.1"}}}); err != nil {
		t.Fatal(err)
	}
	if n, _ := s.OperatorName("prod"); n != def {
		t.Fatalf("a removed context's name outlived it: %q", n)
	}
}

func TestOperatorString(t *testing.T) {
	if got := (Operator{Name: "a@b", KeyFingerprint: "SHA256:x"}).String(); got != "a@b (SHA256:x)" {
		t.Fatal(got)
	}
	if got := (Operator{Name: "a@b"}).String(); got != "a@b" {
		t.Fatal(got)
	}
}
