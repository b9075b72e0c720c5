// Package client is the operator library: what the ployz CLI, the
// dashboard, a CI job or a Go program imports to plan and drive a
// Cluster's operations from an operator context. A Session opens the
// context (core/operator holds the contexts and the local store) and its
// methods return values and typed errors; progress streams through
// callbacks (Hooks). It never prints and never prompts: a caller shows a
// plan and confirms between a Plan method and its Apply.
package client
