package client

import "errors"

// PartialError is an operation that ran but did not fully apply (a
// failed step, a Machine not observed, a refused prune, a Container that
// could not move): the result returned beside it says what did. The CLI
// exits 3 on it.
type PartialError struct{ Err error }

func (e *PartialError) Error() string { return e.Err.Error() }
func (e *PartialError) Unwrap() error { return e.Err }

func partial(err error) error { return &PartialError{Err: err} }

// IsPartial reports whether err is (or wraps) a *PartialError.
func IsPartial(err error) bool {
	var pe *PartialError
	return errors.As(err, &pe)
}
