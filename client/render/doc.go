// Package render is the plain text people read of the operator
// library's values: a plan, a Deploy's live steps and its outcome, a
// removal, a Container's last exit. The CLI writes it to the terminal and
// the dashboard into an action's output, so both say the same thing. It
// writes only to the io.Writer it is given and never asks a terminal
// anything: whether rows are live is the caller's to say.
package render
