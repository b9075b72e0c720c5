package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// A replicaKill ends the web replica's process: SIGKILL, or SIGUSR1, on
// which testapp allocates until the OOM killer ends it (the Service has a
// mem_limit).
type replicaKill string

const (
	sigkill replicaKill = "SIGKILL"
	oomKill replicaKill = "OOM kill"
)

// command is the shell command that kills Container id on its Machine,
// after printing the time.
func (k replicaKill) command(id string) string {
	if k == oomKill {
		return "date +%s.%N; docker kill -s USR1 " + id + " >/dev/null"
	}
	return "p=$(docker inspect -f '{{.State.Pid}}' " + id + "); date +%s.%N; if [ \"$p\" -gt 0 ]; then kill -9 $p; fi"
}

// ingressFailover kills (how) the process of the web replica on one
// Machine, kills times a second apart (more than once: a crash loop),
// while keep-alive clients send GETs, and POSTs, without pause through
// that Machine's :80. The proxy prefers the local replica: a GET
// must never fail (a refused or failed dial is retried on the other
// replica, the failed one is ejected); POSTs caught in flight on the
// killed replica may fail, at most one per kill (one POST worker).
// Printed, never gated:
// how long after the kill the proxy last routed a request to the dead
// replica (its last "upstream ejected" log line: each failed attempt
// past an ejection logs one), and when it answered again after Docker
// restarted it.
func ingressFailover(t *testing.T, ctx context.Context, l *lab.Lab, op *operator, host string, how replicaKill, kills int) {
	var id, machine, ip string
	for _, c := range ps(t, op, "hello").Containers {
		if c.Service == "web" && c.Ready {
			id, machine = c.ID, c.Machine
			break
		}
	}
	for _, m := range l.Machines {
		if m.Name == machine {
			ip = m.IP.String()
		}
	}
	if id == "" || ip == "" {
		t.Fatalf("no ready web replica to kill")
	}
	cip, err := l.Exec(ctx, machine, "docker", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}", id)
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu                               sync.Mutex // guards the counters and times below
		gets, getFails, posts, postFails int
		samples                          []string
		backAt, killedAt, killSent       time.Time
	)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		method := "GET"
		if w == 3 {
			method = "POST"
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{}}
			defer c.CloseIdleConnections()
			for {
				select {
				case <-stop:
					return
				default:
				}
				code, body, err := sendOnce(c, method, ip, host)
				var doc struct{ Hostname string }
				ok := err == nil && code == 200 && json.Unmarshal([]byte(body), &doc) == nil
				now := time.Now()
				mu.Lock()
				if method == "GET" {
					gets++
				} else {
					posts++
				}
				if !ok {
					if method == "GET" {
						getFails++
					} else {
						postFails++
					}
					samples = append(samples, fmt.Sprintf("%s %s: %d %v %s", now.Format("15:04:05.000"), method, code, err, strings.TrimSpace(body)))
				}
				if ok && strings.HasPrefix(id, doc.Hostname) && !killedAt.IsZero() && now.After(killedAt) && backAt.IsZero() {
					backAt = now
				}
				mu.Unlock()
			}
		}()
	}
	time.Sleep(2 * time.Second)
	// The kill happens somewhere inside Exec (a docker exec into the lab
	// Machine): killedAt is when Exec returned, so an answer from the
	// Container after it comes from the restarted process, and the times
	// below are measured from a moment a little after the kill.
	for k := 0; k < kills; k++ {
		if k > 0 { // a crash loop: kill it again as soon as Docker restarted it
			time.Sleep(time.Second)
		}
		out, err := l.Exec(ctx, machine, "sh", "-c", how.command(id))
		if err != nil {
			t.Fatal(err)
		}
		var sec float64
		fmt.Sscan(strings.TrimSpace(out), &sec)
		mu.Lock()
		killedAt, backAt = time.Now(), time.Time{}
		killSent = time.Unix(0, int64(sec*1e9)) // on the lab Machine, which shares this host's clock
		mu.Unlock()
	}
	time.Sleep(8 * time.Second)
	close(stop)
	wg.Wait()
	t.Logf("%d %s(s) of web %s on %s through its :80: %d GETs, %d failed; %d POSTs, %d failed (in flight on the killed replica)",
		kills, how, id[:12], machine, gets, getFails, posts, postFails)
	if how == oomKill {
		lastExitOOM(t, op, id)
	}
	if !backAt.IsZero() {
		t.Logf("benchmark: the killed replica answered again %s after the last kill", backAt.Sub(killSent).Round(time.Millisecond))
	}
	journal, _ := l.Exec(ctx, machine, "journalctl", "-u", "ployz-plugin@ingress-caddy.service", "-o", "short-unix", "--no-pager",
		"--since", "@"+fmt.Sprint(killSent.Unix()-1))
	var last time.Time
	for _, line := range strings.Split(journal, "\n") {
		if !strings.Contains(line, "upstream ejected") || !strings.Contains(line, cip+":") {
			continue
		}
		var sec float64
		if _, err := fmt.Sscan(strings.Fields(line)[0], &sec); err == nil {
			last = time.Unix(0, int64(sec*1e9))
		}
	}
	if last.IsZero() {
		t.Logf("benchmark: no ejection of %s logged after the kill", cip)
	} else {
		t.Logf("benchmark: last %s to the last request routed to the dead replica (%s): %s", how, cip, last.Sub(killSent).Round(time.Millisecond))
	}
	if getFails > 0 || gets == 0 {
		t.Errorf("%d %s(s) of one replica: %d of %d GETs failed: %v", kills, how, getFails, gets, samples[:min(5, len(samples))])
	}
	// One POST worker sends one request at a time: each kill can catch at
	// most the one in flight on the killed process (never replayed: it may
	// have been processed). Any more failed POSTs were sent after the kill,
	// which the proxy must route to the other replica.
	if postFails > kills || posts == 0 {
		t.Errorf("%d %s(s) of one replica: %d of %d POSTs failed, more than one in flight per kill: %v", kills, how, postFails, posts, samples[:min(5, len(samples))])
	}
}

// lastExitOOM checks what `ployz ps` says of Container id's last exit
// after an OOM kill: exit code 137 and a restart, with OOMKilled when
// Docker reported the kill (Docker on cgroup v1 does not always: the
// kernel's memcg OOM is then seen only as a SIGKILL).
func lastExitOOM(t *testing.T, op *operator, id string) {
	t.Helper()
	// ps shows the Container's row, which the Machine rewrites from
	// Docker's events: the restart lands a moment after the exit, so the
	// check waits for it (the time it took is logged).
	start := time.Now()
	eventually(t, 15*time.Second, "ps shows the OOM kill and the restart", func() error {
		for _, c := range ps(t, op, "hello").Containers {
			if c.ID != id {
				continue
			}
			if c.ExitCode != 137 || c.RestartCount == 0 {
				return fmt.Errorf("after an OOM kill %s shows exit code %d and %d restarts; want 137 and at least 1", id[:12], c.ExitCode, c.RestartCount)
			}
			t.Logf("after the OOM kill ps says of %s (%s later): restarts %d, exit code %d, oom_killed %v, finished %s",
				id[:12], time.Since(start).Round(100*time.Millisecond), c.RestartCount, c.ExitCode, c.OOMKilled, c.FinishedAt)
			return nil
		}
		return fmt.Errorf("Container %s (OOM-killed, restarted) is gone from ps", id[:12])
	})
}

// sendOnce sends one request (a POST carries a body net/http cannot
// replay) and reads the answer.
func sendOnce(c *http.Client, method, ip, host string) (int, string, error) {
	var body io.Reader
	if method == "POST" {
		body = strings.NewReader("one shot")
	}
	req, err := http.NewRequest(method, "http://"+ip+"/", body)
	if err != nil {
		return 0, "", err
	}
	req.GetBody = nil
	req.Host = host
	resp, err := c.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}
