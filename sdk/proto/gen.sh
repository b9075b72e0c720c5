#!/bin/sh
# Regenerates the Go code for every .proto under sdk/proto. Needs protoc
# (Debian: protobuf-compiler) and the two Go generators:
#   go install google.golang.org/protobuf/cmd/protoc-gen-go@v1.36.12
#   go install google.golang.org/grpc/cmd/protoc-gen-go-grpc@v1.6.2
set -eu
cd "$(dirname "$0")"
PATH="$(go env GOPATH)/bin:$PATH"
export PATH
find ployz -name '*.proto' | sort | xargs protoc -I . \
	--go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative
