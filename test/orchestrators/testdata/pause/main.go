// Command pause is the pod sandbox's process for the kubelet node of the e2e (node_test.go):
// it does nothing until SIGTERM or SIGINT, like registry.k8s.io/pause, and is built here
// because the run pulls no image from any registry.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT)
	<-sigs
}
