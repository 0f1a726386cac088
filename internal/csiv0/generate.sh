#!/usr/bin/env bash
# generate.sh [OUTDIR]: csi.pb.go (messages, descriptors) and csi_grpc.pb.go (client and server
# stubs) of package csiv0 from proto/csiv0/csi.proto, into OUTDIR (default: this directory).
# `make generate` runs it with the pinned plugins; generate_test.go runs it into a temporary
# directory and fails when the committed files differ.
#
# PROTOC, PROTOC_GEN_GO and PROTOC_GEN_GO_GRPC name the compiler and the plugins (defaults:
# protoc, protoc-gen-go and protoc-gen-go-grpc on PATH). The proto is compiled as
# "csiv0/csi.proto", not "csi.proto": the v1 spec's Go package registers "csi.proto" in the same
# protobuf registry, and two files of one name there panic at init.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=${1:-$here}
pkg="github.com/csi-gateway/csi-gateway/internal/csiv0;csiv0"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"${PROTOC:-protoc}" -I "$here/proto" \
  --plugin=protoc-gen-go="${PROTOC_GEN_GO:-$(command -v protoc-gen-go)}" \
  --plugin=protoc-gen-go-grpc="${PROTOC_GEN_GO_GRPC:-$(command -v protoc-gen-go-grpc)}" \
  --go_out="$tmp" --go_opt=paths=source_relative --go_opt="Mcsiv0/csi.proto=$pkg" \
  --go-grpc_out="$tmp" --go-grpc_opt=paths=source_relative --go-grpc_opt="Mcsiv0/csi.proto=$pkg" \
  csiv0/csi.proto
cp "$tmp/csiv0/csi.pb.go" "$tmp/csiv0/csi_grpc.pb.go" "$out/"
