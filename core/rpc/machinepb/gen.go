// Package machinepb is the generated gRPC code of Machine RPC; see
// machine.proto. Regenerate with `make proto` (packaging/proto.sh);
// `make lint` checks it is current.
package machinepb
