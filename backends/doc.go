// Package backends defines what the gateway forwards calls to. Each backend lives in its own
// sub-package: grpc (passthrough to a CSI driver), rest (HTTP appliances) and embedded (the
// file-backed reference appliance).
package backends
