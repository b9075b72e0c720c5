// Package dashboard serves `ployz dashboard`: a local web UI over the
// same client operations the CLI runs. It never listens on a Machine and
// adds no trust path: every read and action goes through a Source, which
// client/dashsource implements over the operator library exactly as the
// CLI's commands call it.
// The HTTP surface binds to loopback, refuses foreign Host headers (DNS
// rebinding), answers only the browser that spent the one-time launch
// link (its session cookie) and needs a per-run CSRF token for every action.
package dashboard
