package rpc

import "strings"

// Container kinds (LabelKind, ContainerSpec.Kind). Only a service
// Container is one of its Service's replicas: a hook runs before a
// deploy, a run is a one-off (`ployz run`).
const (
	KindService = "service"
	KindHook    = "hook"
	KindRun     = "run"
)

// IsReplica reports whether a Container labelled so is one of its
// Service's replicas: counted, placed, drained and served; neither a
// pre-deploy hook nor a one-off run.
func IsReplica(labels map[string]string) bool {
	k := labels[LabelKind]
	return k != KindHook && k != KindRun
}

// Labels ployzd puts on a one-off run Container beside its kind, for its
// own garbage collection of runs whose CLI is gone.
const (
	// LabelRunKeep is "1" when the run is kept after it ends (--keep).
	LabelRunKeep = "ployz.run.keep"
	// LabelRunAttached is "1" while a terminal is meant to be attached:
	// a running one nobody is attached to any more is stopped.
	LabelRunAttached = "ployz.run.attached"
)

// CmdRunContainer is a streaming command: create a one-off Container of
// kind run (`ployz run`) through create_container's own admission and
// create path, start it, and either answer at once (detach) or relay its
// terminal until it exits. Server frames: a RunEvent with Started first;
// then, attached, the output as data frames (an ExecOutput event marks
// stderr, as exec's); last a RunEvent with Exited. Client frames, while
// attached: data is the process's stdin, EOF closes it, and an event is
// a RunControl (a signal or a terminal size). A client that goes away
// has its run stopped. Unless kept, the daemon removes the Container
// once it ended and the Log Store holds its output.
const (
	CmdRunContainer = "run_container"
	CapRunContainer = "ployz.container.run.v1"
)

// RunContainerRequest is run_container's request: a create_container
// request whose spec is of kind run, and how the run is attached.
type RunContainerRequest struct {
	CreateContainerRequest
	// Detach starts the run and answers at once.
	Detach bool `json:"detach,omitempty"`
	// Keep leaves the Container after it ended (its exit code, for
	// `docker inspect`); it is removed otherwise.
	Keep bool `json:"keep,omitempty"`
	// TTY allocates a terminal; Stdin attaches the client's input.
	TTY   bool `json:"tty,omitempty"`
	Stdin bool `json:"stdin,omitempty"`
	// Width and Height are the client's terminal size (TTY only).
	Width  uint16 `json:"width,omitempty"`
	Height uint16 `json:"height,omitempty"`
}

// Validate refuses run options that make no sense together, naming the
// field; the spec itself is checked as create_container checks it.
func (r RunContainerRequest) Validate() error {
	if r.Detach && (r.TTY || r.Stdin) {
		f := "tty"
		if !r.TTY {
			f = "stdin"
		}
		return InvalidField(f, "a detached run has no terminal attached")
	}
	if (r.Width != 0 || r.Height != 0) && !r.TTY {
		return InvalidField("width", "a terminal size needs tty")
	}
	if r.Spec.Kind != "" && r.Spec.Kind != KindRun {
		return InvalidField("spec.kind", "%q: run_container creates Containers of kind %s only", r.Spec.Kind, KindRun)
	}
	return nil
}

// RunEvent is one event of run_container's server: exactly one field set.
type RunEvent struct {
	Started *RunStarted `json:"started,omitempty"`
	Exited  *RunExited  `json:"exited,omitempty"`
}

// RunStarted names the started Container.
type RunStarted struct {
	ID        string `json:"id"`
	Name      string `json:"name"`
	MachineID string `json:"machine_id"`
}

// RunExited is how an attached run ended.
type RunExited struct {
	ExitCode  int  `json:"exit_code"`
	OOMKilled bool `json:"oom_killed,omitempty"`
	// Removed says the Container is gone; Note says why it was not
	// removed, or what removing it could not confirm.
	Removed bool   `json:"removed,omitempty"`
	Note    string `json:"note,omitempty"`
}

// RunControl is a client event of an attached run: a signal for the
// process, or the terminal's new size.
type RunControl struct {
	Signal string `json:"signal,omitempty"` // one of RunSignals
	Width  uint16 `json:"width,omitempty"`
	Height uint16 `json:"height,omitempty"`
}

// RunSignals are the signals a client may forward to its run.
var RunSignals = []string{"SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"}

// Validate refuses a signal outside RunSignals and a half-given size.
func (c RunControl) Validate() error {
	if c.Signal != "" {
		ok := false
		for _, s := range RunSignals {
			ok = ok || s == c.Signal
		}
		if !ok {
			return InvalidField("signal", "%q is not one of %s", c.Signal, strings.Join(RunSignals, ", "))
		}
	}
	if (c.Width == 0) != (c.Height == 0) {
		return InvalidField("width", "a terminal size needs width and height (got %dx%d)", c.Width, c.Height)
	}
	return nil
}
