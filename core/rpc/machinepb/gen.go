// Package machinepb is the generated gRPC code of Machine RPC; see
// machine.proto. Regenerate with `make proto`.
package machinepb

//go:generate sh -c "PATH=$(go env GOPATH)/bin:$PATH protoc -I . --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative machine.proto"
