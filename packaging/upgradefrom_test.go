package packaging

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/ployz/ployz/internal/prereq"
)

// git runs git in dir and returns its trimmed output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=t", "-c", "user.email=t@t"}, args...)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// pointerCommit is the one commit hash packaging/previous-release names.
func pointerCommit(text string) (string, error) {
	var found []string
	for _, line := range strings.Split(text, "\n") {
		if line = strings.TrimSpace(line); line != "" && !strings.HasPrefix(line, "#") {
			found = append(found, line)
		}
	}
	if len(found) != 1 || !regexp.MustCompile(`^[0-9a-f]{40}$`).MatchString(found[0]) {
		return "", errors.New("want exactly one full commit hash outside comments, got " + strings.Join(found, ", "))
	}
	return found[0], nil
}

// TestPreviousReleaseIsAnAncestor: the committed release N-1 is a commit
// this history holds, so TestUpgradeFromPrevious starts from it and not
// silently from HEAD~1 (upgrade-from.sh falls back when it is unknown).
func TestPreviousReleaseIsAnAncestor(t *testing.T) {
	b, err := os.ReadFile("previous-release")
	if err != nil {
		t.Fatal(err)
	}
	prev, err := pointerCommit(string(b))
	if err != nil {
		t.Fatalf("packaging/previous-release: %v", err)
	}
	prereq.Command(t, "git")
	if shallow := git(t, "..", "rev-parse", "--is-shallow-repository"); shallow != "false" {
		prereq.Missing(t, "a clone with history", errors.New("this clone is shallow"))
	}
	if err := exec.Command("git", "-C", "..", "merge-base", "--is-ancestor", prev, "HEAD").Run(); err != nil {
		t.Errorf("packaging/previous-release names %s, not an ancestor of HEAD: %v", prev, err)
	}
}

// TestUpgradeFromPicksReleaseNMinus1 runs upgrade-from.sh in a scratch
// repository through each of its cases.
func TestUpgradeFromPicksReleaseNMinus1(t *testing.T) {
	prereq.Command(t, "git")
	dir := t.TempDir()
	script, err := os.ReadFile("upgrade-from.sh")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Join(dir, "packaging"), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "packaging", "upgrade-from.sh"), script, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q")
	var commits []string
	for _, msg := range []string{"one", "two", "three"} {
		git(t, dir, "commit", "-q", "--allow-empty", "-m", msg)
		commits = append(commits, git(t, dir, "rev-parse", "HEAD"))
	}
	pointTo := func(text string) {
		if err := os.WriteFile(filepath.Join(dir, "packaging", "previous-release"), []byte("# N-1\n"+text+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	run := func() string {
		out, err := exec.Command(filepath.Join(dir, "packaging", "upgrade-from.sh")).Output()
		if err != nil {
			t.Fatalf("upgrade-from.sh: %v", err)
		}
		return strings.TrimSpace(string(out))
	}
	for _, c := range []struct{ name, pointer, want string }{
		{"pointer to an ancestor", commits[0], commits[0]},
		{"pointer to HEAD itself", commits[2], commits[1]},
		{"pointer unknown here", strings.Repeat("ab", 20), commits[1]},
		{"pointer malformed", "main", commits[1]},
	} {
		pointTo(c.pointer)
		if got := run(); got != c.want {
			t.Errorf("%s: upgrade-from.sh printed %q, want %q", c.name, got, c.want)
		}
	}
	pointTo(commits[0])
	git(t, dir, "tag", "v1.0.0", commits[1])
	if got := run(); got != "v1.0.0" {
		t.Errorf("with a release tag before HEAD: printed %q, want v1.0.0", got)
	}
}
