package zfsvol

// The zfs/zpool command double: this test binary itself, reached through
// symlinks named zfs and zpool first on PATH. It answers from a session
// recorded on a real pool (testdata/zfs-session.json, large outputs
// beside it gzipped), one recorded command after the other: a command
// that is not the next one recorded, or stdin that differs from the
// recorded stream, fails the test. Recording is the same binary with
// PLOYZ_ZFSDOUBLE_RECORD=DIR on a Machine with a pool: it runs the real
// commands (in PLOYZ_ZFSDOUBLE_REAL, default /usr/sbin) and writes what
// they did into DIR.

import (
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"unicode/utf8"
)

const (
	envRecord   = "PLOYZ_ZFSDOUBLE_RECORD"  // record into this directory (a Machine with a pool)
	envReal     = "PLOYZ_ZFSDOUBLE_REAL"    // where the real zfs and zpool are (recording)
	envSession  = "PLOYZ_ZFSDOUBLE_SESSION" // the session to answer from (replay)
	envState    = "PLOYZ_ZFSDOUBLE_STATE"   // the double's working directory
	sessionFile = "zfs-session.json"        // in testdata/ (or the record directory)
	streamDir   = "zfs-session"             // outputs too large or binary to inline, gzipped
	inlineLimit = 8 << 10                   // larger outputs go to streamDir
	// doubleFailed is the double's exit code for "not what was recorded".
	doubleFailed = 97
)

// session is a recorded run of zfs and zpool commands.
type session struct {
	// Recorded says where and how the session was recorded.
	Recorded string `json:"recorded"`
	Steps    []step `json:"steps"`
}

// step is one command: its arguments, the stdin it read, and what it
// answered.
type step struct {
	Cmd  string   `json:"cmd"` // zfs or zpool
	Args []string `json:"args"`
	// StdinBytes/StdinSHA256: how much of its stdin the command read (the
	// recorder forwarded), and its hash; zero for none.
	StdinBytes  int64  `json:"stdin_bytes,omitempty"`
	StdinSHA256 string `json:"stdin_sha256,omitempty"`
	Stdout      string `json:"stdout,omitempty"`
	// StdoutFile names streamDir's gzipped copy of a large or binary stdout.
	StdoutFile  string `json:"stdout_file,omitempty"`
	StdoutBytes int64  `json:"stdout_bytes,omitempty"`
	Stderr      string `json:"stderr,omitempty"`
	Exit        int    `json:"exit"`
}

// TestMain runs the double when this binary was started as zfs or zpool.
func TestMain(m *testing.M) {
	if name := filepath.Base(os.Args[0]); name == "zfs" || name == "zpool" {
		os.Exit(runDouble(name, os.Args[1:]))
	}
	os.Exit(m.Run())
}

// zfsDouble puts the double first on PATH for the rest of t and answers
// whether it records (true) or replays. Replaying, a cleanup fails t for
// every command the double refused and for recorded steps never asked.
func zfsDouble(t *testing.T) (recording bool) {
	t.Helper()
	return useDouble(t, filepath.Join("testdata", sessionFile))
}

// useDouble is zfsDouble answering from the session at path.
func useDouble(t *testing.T, path string) (recording bool) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	bin, state := t.TempDir(), t.TempDir()
	for _, n := range []string{"zfs", "zpool"} {
		if err := os.Symlink(self, filepath.Join(bin, n)); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv(envState, state)
	recordDir := os.Getenv(envRecord)
	if recordDir != "" {
		if os.Getenv(envReal) == "" {
			t.Setenv(envReal, "/usr/sbin")
		}
		t.Setenv("PATH", bin+string(os.PathListSeparator)+os.Getenv("PATH"))
		t.Cleanup(func() { writeSession(t, state, recordDir) })
		return true
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		t.Fatal(err)
	}
	s := loadSession(t, abs)
	t.Setenv(envSession, abs)
	t.Setenv("PATH", bin) // nothing else: a real zfs is never reached
	t.Cleanup(func() {
		if b, err := os.ReadFile(filepath.Join(state, "failures.txt")); err == nil {
			t.Errorf("the zfs double refused:\n%s", b)
		}
		b, _ := os.ReadFile(filepath.Join(state, "next"))
		if n, _ := strconv.Atoi(strings.TrimSpace(string(b))); n != len(s.Steps) && !t.Failed() {
			t.Errorf("the zfs double answered %d of the %d recorded commands; the next was %s %q", n, len(s.Steps), s.Steps[n].Cmd, s.Steps[n].Args)
		}
	})
	return false
}

func loadSession(t testing.TB, path string) *session {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("zfs double: %v", err)
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil || len(s.Steps) == 0 {
		t.Fatalf("zfs double: %s: %d steps, %v", path, len(s.Steps), err)
	}
	return &s
}

// canonical is args with each run of "-o k=v" options sorted: go-zfs
// builds them from a map, in no fixed order.
func canonical(args []string) []string {
	out := slices.Clone(args)
	for i := 0; i < len(out); {
		j := i
		for j+1 < len(out) && out[j] == "-o" && strings.Contains(out[j+1], "=") {
			j += 2
		}
		if j-i >= 4 {
			var vals []string
			for k := i + 1; k < j; k += 2 {
				vals = append(vals, out[k])
			}
			slices.Sort(vals)
			for k, v := range vals {
				out[i+2*k+1] = v
			}
		}
		i = max(j, i+1)
	}
	return out
}

// runDouble is the double's main: replay by default, record when asked.
func runDouble(name string, args []string) int {
	state := os.Getenv(envState)
	if state == "" {
		fmt.Fprintf(os.Stderr, "%s: %s not set\n", "zfs-double", envState)
		return doubleFailed
	}
	// One command at a time, as the session was recorded.
	lock, err := os.OpenFile(filepath.Join(state, "lock"), os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", "zfs-double", err)
		return doubleFailed
	}
	defer lock.Close()
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", "zfs-double", err)
		return doubleFailed
	}
	if os.Getenv(envRecord) != "" {
		return record(state, name, args)
	}
	return replay(state, name, args)
}

// refuse notes why the double did not answer, for the test to report.
func refuse(state, format string, a ...any) int {
	msg := fmt.Sprintf(format, a...)
	f, err := os.OpenFile(filepath.Join(state, "failures.txt"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err == nil {
		fmt.Fprintln(f, msg)
		f.Close()
	}
	fmt.Fprintf(os.Stderr, "%s: %s\n", "zfs-double", msg)
	return doubleFailed
}

func replay(state, name string, args []string) int {
	path := os.Getenv(envSession)
	b, err := os.ReadFile(path)
	if err != nil {
		return refuse(state, "%v", err)
	}
	var s session
	if err := json.Unmarshal(b, &s); err != nil {
		return refuse(state, "%s: %v", path, err)
	}
	cb, _ := os.ReadFile(filepath.Join(state, "next"))
	n, _ := strconv.Atoi(strings.TrimSpace(string(cb)))
	if n >= len(s.Steps) {
		return refuse(state, "%s %q: all %d recorded commands were answered", name, args, len(s.Steps))
	}
	st := s.Steps[n]
	if st.Cmd != name || !slices.Equal(canonical(st.Args), canonical(args)) {
		return refuse(state, "step %d: got %s %q, recorded %s %q", n, name, args, st.Cmd, st.Args)
	}
	if err := os.WriteFile(filepath.Join(state, "next"), []byte(strconv.Itoa(n+1)), 0o600); err != nil {
		return refuse(state, "%v", err)
	}
	if st.StdinBytes > 0 {
		h := sha256.New()
		k, err := io.CopyN(h, os.Stdin, st.StdinBytes)
		if got := hex.EncodeToString(h.Sum(nil)); k != st.StdinBytes || got != st.StdinSHA256 {
			return refuse(state, "step %d (%s %q): stdin %d bytes %s (%v), recorded %d bytes %s", n, name, args, k, got, err, st.StdinBytes, st.StdinSHA256)
		}
	}
	out := []byte(st.Stdout)
	if st.StdoutFile != "" {
		if out, err = readGzip(filepath.Join(filepath.Dir(path), streamDir, st.StdoutFile)); err != nil {
			return refuse(state, "step %d: %v", n, err)
		}
	}
	if _, err := os.Stdout.Write(out); err != nil {
		// The reader went away (a cut stream): so would zfs's.
		return 1
	}
	os.Stderr.WriteString(st.Stderr)
	return st.Exit
}

func readGzip(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return io.ReadAll(z)
}

// record runs the real command, passing stdin, stdout and stderr
// through, and journals what it did.
func record(state, name string, args []string) int {
	realDir := os.Getenv(envReal)
	cmd := exec.Command(filepath.Join(realDir, name), args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout = io.MultiWriter(os.Stdout, &stdout)
	cmd.Stderr = io.MultiWriter(os.Stderr, &stderr)
	in, err := cmd.StdinPipe()
	if err != nil {
		return refuse(state, "%v", err)
	}
	if err := cmd.Start(); err != nil {
		return refuse(state, "%v", err)
	}
	// Forward stdin until it ends or the command stops reading; the
	// count is what the command was given, which replay reads again.
	h := sha256.New()
	var fed atomic.Int64
	done := make(chan struct{})
	go func() {
		defer close(done)
		buf := make([]byte, 64<<10)
		for {
			k, rerr := os.Stdin.Read(buf)
			if k > 0 {
				w, werr := in.Write(buf[:k])
				h.Write(buf[:w])
				fed.Add(int64(w))
				if werr != nil {
					return
				}
			}
			if rerr != nil {
				in.Close()
				return
			}
		}
	}()
	werr := cmd.Wait()
	// Started from a terminal or /dev/null, stdin ends at once; a
	// stream's copy has ended or fails on the closed pipe now.
	<-done
	code := 0
	var ee *exec.ExitError
	if errors.As(werr, &ee) {
		code = ee.ExitCode()
	} else if werr != nil {
		return refuse(state, "%v", werr)
	}
	st := step{Cmd: name, Args: args, Stderr: stderr.String(), Exit: code}
	if n := fed.Load(); n > 0 {
		st.StdinBytes, st.StdinSHA256 = n, hex.EncodeToString(h.Sum(nil))
	}
	f, err := os.OpenFile(filepath.Join(state, "journal.jsonl"), os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o600)
	if err != nil {
		return refuse(state, "%v", err)
	}
	defer f.Close()
	if out := stdout.Bytes(); len(out) <= inlineLimit && utf8.Valid(out) {
		st.Stdout = string(out)
	} else {
		// writeSession gzips it into streamDir under this name.
		prev, _ := io.ReadAll(f)
		st.StdoutFile = fmt.Sprintf("stdout-%03d.gz", bytes.Count(prev, []byte("\n")))
		st.StdoutBytes = int64(len(out))
		if err := os.WriteFile(filepath.Join(state, st.StdoutFile+".raw"), out, 0o600); err != nil {
			return refuse(state, "%v", err)
		}
	}
	line, _ := json.Marshal(st)
	if _, err := f.Write(append(line, '\n')); err != nil {
		return refuse(state, "%v", err)
	}
	return code
}

// writeSession turns the double's journal into DIR/zfs-session.json and
// DIR/zfs-session/*.gz, for testdata/.
func writeSession(t *testing.T, state, dir string) {
	b, err := os.ReadFile(filepath.Join(state, "journal.jsonl"))
	if err != nil {
		t.Errorf("zfs double: nothing recorded: %v", err)
		return
	}
	if f, err := os.ReadFile(filepath.Join(state, "failures.txt")); err == nil {
		t.Errorf("zfs double: the recorder failed:\n%s", f)
	}
	host, _ := os.Hostname()
	s := session{Recorded: fmt.Sprintf("recorded by %s=%s on %s (%s)", envRecord, dir, host, zfsVersion())}
	if err := os.MkdirAll(filepath.Join(dir, streamDir), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var st step
		if err := json.Unmarshal(line, &st); err != nil {
			t.Fatalf("zfs double journal: %v", err)
		}
		if st.StdoutFile != "" {
			raw, err := os.ReadFile(filepath.Join(state, st.StdoutFile+".raw"))
			if err != nil {
				t.Fatal(err)
			}
			var z bytes.Buffer
			w, _ := gzip.NewWriterLevel(&z, gzip.BestCompression)
			w.Write(raw)
			w.Close()
			if err := os.WriteFile(filepath.Join(dir, streamDir, st.StdoutFile), z.Bytes(), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		s.Steps = append(s.Steps, st)
	}
	out, _ := json.MarshalIndent(s, "", "  ")
	if err := os.WriteFile(filepath.Join(dir, sessionFile), append(out, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("zfs double: recorded %d commands into %s", len(s.Steps), dir)
}

// zfsVersion is `zfs version`'s first line, run outside the journal.
func zfsVersion() string {
	out, err := exec.Command(filepath.Join(os.Getenv(envReal), "zfs"), "version").Output()
	if err != nil {
		return "zfs version: " + err.Error()
	}
	return strings.SplitN(strings.TrimSpace(string(out)), "\n", 2)[0]
}
