// Package serving is the Serving Pointer contract every data-path plugin
// honours, Internal DNS and ingress alike: which Containers of a Service
// receive traffic. A Container serves when its row says Ready with an
// IPv4 address observed in its Machine's current session and, when the
// Service has a Serving Pointer, the pointer names it with the same
// Machine, image and deployment. A pointer that moved before its
// Containers' ready rows arrived holds the previous set for HoldFor, so a
// redeploy never leaves a Service without an answer.
//
// Compute is pure: callers read the containers, serving and machines
// tables, pass the previous result, and get the new one.
package serving
