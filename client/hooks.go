package client

import "github.com/ployz/ployz/core/deploy"

// Hooks hear what an operation does while it runs; every field may be
// nil. Step is called as the deploy engine's Executor.Progress is (one
// event at a time), Removal from the operation's goroutine, and Warn
// may also come from a Deploy record's background writer.
type Hooks struct {
	// Step hears each step of a running plan start and end.
	Step func(deploy.Event)
	// Removal hears how a pending project removal stands once tried.
	Removal func(RemovalReport)
	// Warn hears a problem that does not stop the operation.
	Warn func(error)
}

func (h Hooks) step(e deploy.Event) {
	if h.Step != nil {
		h.Step(e)
	}
}

func (h Hooks) removal(r RemovalReport) {
	if h.Removal != nil {
		h.Removal(r)
	}
}

func (h Hooks) warn(err error) {
	if h.Warn != nil {
		h.Warn(err)
	}
}
