package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"

	"github.com/ployz/ployz/core/deploy"
	"github.com/ployz/ployz/core/rpc"
	"github.com/ployz/ployz/sdk/ingress"
)

// RunPlan is a planned one-off run: the Service Container whose spec it
// copies, the Machine it runs on, and the run's own spec.
type RunPlan struct {
	Namespace string `json:"namespace"`
	Service   string `json:"service"`
	// From is the Container of the current deployment it copies.
	From      rpc.ContainerObservation `json:"-"`
	MachineID string                   `json:"machine_id"`
	Machine   string                   `json:"machine"`
	Name      string                   `json:"container"`
	Spec      rpc.ContainerSpec        `json:"-"`
	// Pull: the Machine lacks the image and pulls it first.
	Pull  bool `json:"pull,omitempty"`
	files map[string][]byte
}

// PlanRun observes the Cluster and plans req: the current deployment's
// spec (environment values and shipped files as its Machine holds them)
// on the Machine chooseRun picks.
func (s *Session) PlanRun(ctx context.Context, req RunRequest) (*RunPlan, error) {
	if req.Service == "" {
		return nil, errors.New("service: name one")
	}
	snap, err := deploy.Observe(ctx, s.ent, req.Namespace, req.Machine != "")
	if err != nil {
		return nil, err
	}
	ch, err := chooseRun(snap, req.Namespace, req.Service, s.servingDeployment(ctx, req.Namespace, req.Service), req.Machine)
	if err != nil {
		return nil, err
	}
	var ex rpc.ContainerExport
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: ch.from.MachineID}, rpc.ExportContainer, rpc.ExportContainerRequest{ID: ch.from.ID, WithFiles: true}, &ex); err != nil {
		return nil, fmt.Errorf("read the spec of %s: %w", ch.from.Name, err)
	}
	for _, f := range ex.Spec.Files {
		if _, ok := ex.Files[f.Digest]; !ok {
			return nil, fmt.Errorf("Container %s mounts %s, shipped from the operator's computer, and its Machine did not answer its content: redeploy the Service, then run", ch.from.Name, f.Source)
		}
	}
	p := &RunPlan{Namespace: req.Namespace, Service: req.Service, From: ch.from, MachineID: ch.target.ID, Machine: ch.target.Name,
		Name: req.Namespace + "-" + req.Service + "-run-" + deploy.NewID(2), Spec: RunSpec(ex.Spec, req.Command), files: ex.Files}
	p.Pull = ch.target.ImagesKnown && !deploy.HasImage(ch.target.Images, p.Spec.Image)
	return p, nil
}

// servingDeployment is the deployment the Service's Serving Pointer
// names, "" when it has none or the entry cannot say.
func (s *Session) servingDeployment(ctx context.Context, ns, service string) string {
	var st rpc.ServingStatus
	key := ingress.ServiceKey(ns, service)
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{}, rpc.ReadServingStatus, rpc.ServingStatusRequest{Services: []string{key}}, &st); err != nil {
		return ""
	}
	for _, sv := range st.Services {
		if sv.Service == key {
			return sv.Deployment
		}
	}
	return ""
}

// RunIO is a run's terminal: what its process reads (nil: nothing), where
// its output goes, and the signals and sizes to pass on while attached.
type RunIO struct {
	Stdin          io.Reader
	Stdout, Stderr io.Writer
	Control        <-chan rpc.RunControl
}

// RunResult is how a run went.
type RunResult struct {
	Namespace  string `json:"namespace"`
	Service    string `json:"service"`
	Container  string `json:"container"`
	ID         string `json:"id"`
	Machine    string `json:"machine"`
	MachineID  string `json:"machine_id"`
	Deployment string `json:"deployment"`
	Detached   bool   `json:"detached,omitempty"`
	Kept       bool   `json:"kept,omitempty"`
	// ExitCode is the process's, once it ended while attached.
	ExitCode  *int `json:"exit_code,omitempty"`
	OOMKilled bool `json:"oom_killed,omitempty"`
	Removed   bool `json:"removed,omitempty"`
	// Note says what the Machine could not do after the run (remove it,
	// confirm its output in the Log Store).
	Note string `json:"note,omitempty"`
}

// Run runs p on its Machine: pulls the image first when the Machine
// lacks it, then starts the run and, unless detached, relays o until the
// process ends.
func (s *Session) Run(ctx context.Context, p *RunPlan, req RunRequest, o RunIO) (RunResult, error) {
	res := RunResult{Namespace: p.Namespace, Service: p.Service, Container: p.Name, Machine: p.Machine, MachineID: p.MachineID,
		Deployment: p.Spec.DeploymentID, Detached: req.Detach, Kept: req.Keep}
	if p.Pull {
		if err := s.pullFor(ctx, p); err != nil {
			return res, err
		}
	}
	rr := rpc.RunContainerRequest{CreateContainerRequest: rpc.CreateContainerRequest{Name: p.Name, Spec: p.Spec, Files: p.files},
		Detach: req.Detach, Keep: req.Keep, TTY: req.TTY && !req.Detach, Stdin: req.Stdin && !req.Detach && o.Stdin != nil}
	if rr.TTY {
		rr.Width, rr.Height = req.Width, req.Height
	}
	st, err := rpc.Open(ctx, s.ent, rpc.Target{One: p.MachineID}, rpc.RunContainer, rr)
	if err != nil {
		return res, fmt.Errorf("run on %s: %w", p.Machine, err)
	}
	defer st.Close()
	if !req.Detach {
		send := &streamSender{st: st}
		if rr.Stdin {
			// The stream stays open after stdin's end, for control events.
			go pumpStdin(o.Stdin, send.send, func() { send.send(rpc.StreamFrame{EOF: true}) }) // the process sees EOF or the stream is gone
		}
		if o.Control != nil {
			go send.controls(ctx, o.Control)
		}
	}
	return res, relayRun(st, o, &res)
}

// pullFor has p's Machine pull its image, with the operator's registry
// credentials.
func (s *Session) pullFor(ctx context.Context, p *RunPlan) error {
	auth, err := RegistryAuthFor([]string{p.Spec.Image})
	if err != nil {
		return err
	}
	req := rpc.PullImageRequest{Image: p.Spec.Image}
	if auth != nil {
		req.RegistryAuth = auth(p.Spec.Image)
	}
	if err := rpc.InvokeInto(ctx, s.ent, rpc.Target{One: p.MachineID}, rpc.PullImage, req, nil); err != nil {
		return fmt.Errorf("machine %s lacks image %s and could not pull it (`ployz image push %s --machine %s` delivers it): %w",
			p.Machine, p.Spec.Image, p.Spec.Image, p.Machine, err)
	}
	return nil
}

// relayRun reads a run's stream to its end into o and res.
func relayRun(st *rpc.ClientStream, o RunIO, res *RunResult) error {
	for {
		f, err := st.Recv()
		if errors.Is(err, io.EOF) || err == nil && f.Done {
			return nil
		}
		if err != nil {
			return err
		}
		if writeOutput(f, o.Stdout, o.Stderr) {
			continue
		}
		e, err := rpc.RunContainer.Event(f)
		if err != nil {
			return fmt.Errorf("run: %w", err)
		}
		if e.Started != nil {
			res.ID = e.Started.ID
		}
		if x := e.Exited; x != nil {
			code := x.ExitCode
			res.ExitCode, res.OOMKilled, res.Removed, res.Note = &code, x.OOMKilled, x.Removed, x.Note
		}
	}
}

// streamSender sends a run's input frames from several goroutines.
type streamSender struct {
	mu sync.Mutex
	st *rpc.ClientStream
}

func (s *streamSender) send(f rpc.StreamFrame) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.st.Send(f)
}

// controls sends each control event until ctx ends or c closes.
func (s *streamSender) controls(ctx context.Context, c <-chan rpc.RunControl) {
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-c:
			if !ok {
				return
			}
			b, _ := json.Marshal(ev)
			if s.send(rpc.StreamFrame{Event: b}) != nil {
				return
			}
		}
	}
}

// DetachedRun is `ployz run --detach`'s result: the run, and the
// `ployz logs` command that follows its output.
type DetachedRun struct {
	RunResult
	Logs string `json:"logs"`
}

// Detached is res with the logs command for a run of the project and
// environment the caller's flags named ("" and DefaultEnvironment are
// left out of the command).
func Detached(res RunResult, service, project, env string) DetachedRun {
	parts := []string{"ployz logs", service}
	if project != "" {
		parts = append(parts, "-p", project)
	}
	if env != deploy.DefaultEnvironment {
		parts = append(parts, "--env", env)
	}
	return DetachedRun{RunResult: res, Logs: strings.Join(append(parts, "--container", res.Container, "-f"), " ")}
}
