package e2e

import (
	"bufio"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/ployz/ployz/e2e/lab"
)

// sockActCompose is a Service whose host port the Machine holds and
// passes to the Container (x-socket-activation); MESSAGE changes the spec
// so a redeploy replaces the Container.
const sockActCompose = `name: sockact
services:
  web:
    image: %s
    environment: {MESSAGE: %q}
    ports: ["18089:8080"]
    x-socket-activation: true
`

// sockActRedeploy: a connect loop (no retries) against a socket-activated
// host port on a lab Machine across a redeploy that replaces the
// Container: nothing refused, nothing dropped, and the new Container
// answers at the end. A step of TestRun (light lab).
func sockActRedeploy(t *testing.T, l *lab.Lab, op *operator) {
	deploy := func(msg string) deployDoc {
		doc, errs, code := deployFile(t, op, fmt.Sprintf(sockActCompose, lab.TestAppRef(), msg))
		if code != 0 || doc.Outcome == nil || doc.Outcome.Status != "completed" {
			t.Fatalf("deploy %s: exit %d\n%s", msg, code, errs)
		}
		return doc
	}
	deploy("first")
	home := ps(t, op, "sockact").Containers[0].Machine
	var addr string
	for _, m := range l.Machines {
		if m.Name == home {
			addr = net.JoinHostPort(m.IP.String(), "18089")
		}
	}
	get := func() (string, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return "", err
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(20 * time.Second)) // test connection
		fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n")
		res, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			return "", err
		}
		defer res.Body.Close()
		var b strings.Builder
		bufio.NewReader(res.Body).WriteTo(&b) // checked by content
		return b.String(), nil
	}
	eventually(t, 30*time.Second, "the activated port answering", func() error { _, err := get(); return err })

	var ok, refused, failed atomic.Int64
	var firstErr atomic.Value
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		for {
			select {
			case <-stop:
				return
			default:
			}
			_, err := get()
			switch {
			case err == nil:
				ok.Add(1)
			case errors.Is(err, syscall.ECONNREFUSED):
				refused.Add(1)
			default:
				failed.Add(1)
				firstErr.CompareAndSwap(nil, err.Error())
			}
		}
	}()
	start := time.Now()
	doc := deploy("second")
	time.Sleep(500 * time.Millisecond)
	close(stop)
	<-done
	t.Logf("socket activation on %s: redeploy in %s: ok %d, refused %d, failed %d (first: %v); plan %+v",
		home, time.Since(start).Round(time.Millisecond), ok.Load(), refused.Load(), failed.Load(), firstErr.Load(), doc.Plan.Rows)
	if refused.Load() != 0 || failed.Load() != 0 || ok.Load() == 0 {
		t.Fatalf("connections refused or dropped across the redeploy")
	}
	if body, err := get(); err != nil || !strings.Contains(body, `"message":"second"`) {
		t.Fatalf("after the redeploy: %q, %v", body, err)
	}
}
