// Package fakecluster serves fake Machines for the operator library's
// and the CLI's tests: the Machine RPC commands a Deploy, a drain and
// the dashboard's reads use, answered from in-memory records over real
// rpc sockets.
package fakecluster
