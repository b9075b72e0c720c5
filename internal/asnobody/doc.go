// Package asnobody runs part of a test as the unprivileged user nobody: the
// test binary is copied where nobody may execute it and started again with
// that uid, running one named test function that does the unprivileged
// side (binding a port, dialing a socket) and reports on stdout.
//
// Tests that use it are root-only (prereq.Root): only root can switch to
// another uid.
package asnobody
