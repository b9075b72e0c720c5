#!/usr/bin/env bash
# Regenerates the gRPC Go code of the plugin SDK (sdk/proto/ployz/...) and
# of Machine RPC (core/rpc/machinepb) from their .proto files (`make
# proto`), or with --check (`make lint`) regenerates them into a scratch
# copy and fails, showing the diff, when the committed files differ.
#
# protoc is Debian's protobuf-compiler (packaging/prereq.sh installs it);
# the committed files name protoc 3.21.12, Debian 12's, in their header,
# and a check under another protoc says so rather than showing every file
# as changed. The two Go generators are go.mod tools, so their versions are
# the module's (protoc-gen-go is google.golang.org/protobuf's own).
#
# usage: proto.sh [--check]
set -euo pipefail
cd "$(dirname "$0")/.."
check=false
[ "${1:-}" = --check ] && check=true
GO=${GO:-go}
want_protoc="libprotoc 3.21.12"

command -v protoc >/dev/null || { echo "proto: protoc missing: apt-get install protobuf-compiler (packaging/prereq.sh)" >&2; exit 1; }
if [ "$(protoc --version)" != "$want_protoc" ]; then
  echo "proto: protoc is '$(protoc --version)', the committed files were made by '$want_protoc' (Debian 12's protobuf-compiler)" >&2
  exit 1
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$GO" build -o "$tmp/bin/" google.golang.org/protobuf/cmd/protoc-gen-go google.golang.org/grpc/cmd/protoc-gen-go-grpc
export PATH="$tmp/bin:$PATH"

# gen DIR FILE...: protoc over FILE... (relative to DIR), output beside them.
gen() {
  local dir=$1
  shift
  (cd "$dir" && protoc -I . \
    --go_out=. --go_opt=paths=source_relative \
    --go-grpc_out=. --go-grpc_opt=paths=source_relative "$@")
}

# the trees that hold .proto files, each regenerated where it lies
trees=(sdk/proto core/rpc/machinepb)
root=.
if $check; then
  root=$tmp/tree
  for t in "${trees[@]}"; do
    mkdir -p "$root/$t"
    cp -R "$t/." "$root/$t/"
    find "$root/$t" -name '*.pb.go' -delete
  done
fi
for t in "${trees[@]}"; do
  # shellcheck disable=SC2046 # the .proto paths hold no spaces
  gen "$root/$t" $(cd "$root/$t" && find . -name '*.proto' | sed 's|^\./||' | sort)
done
$check || exit 0

status=0
for t in "${trees[@]}"; do
  # the copies differ only in the .pb.go files, regenerated there
  if ! diff -ru "$t" "$root/$t" >"$tmp/diff"; then
    status=1
    cat "$tmp/diff"
  fi
done
if [ $status -ne 0 ]; then
  echo "proto: the generated code above differs from its .proto files: run make proto and commit the result" >&2
  exit 1
fi
echo "proto: the generated code is current"
