// Package backends defines what the gateway forwards calls to. Each backend lives in its own
// sub-package: grpc (passthrough to a CSI driver), rest (HTTP appliances) and embedded (the
// file-backed reference appliance).
//
// It also holds what every backend shares with the gateway: the error classes (errors.go),
// the per-call CallInfo (attempts reported back, and the call's secret scrubber lent to the
// backend), circuit breakers and retry budgets, how a backend traces its own calls
// (ClientTracing: the provider and propagator of its client spans), how a backend flattens
// words it did not write into one line of a message (OneLine), and how a field is known to be
// a CSI secret (HasSecretOption, CarriesSecrets).
package backends
