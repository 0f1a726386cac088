// Command csi-gateway is the CSI gateway and its tools. Subcommands: serve (the gateway),
// appliance (the reference appliance as a CSI driver and HTTP server), call (a CSI client for
// people), tap (a live view of a running gateway's calls), ledger (export, import and migrate the
// tenancy ledger) and version.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(exitCode(err, os.Stderr))
}

// exitError carries a chosen exit code; its message, if any, has already been printed.
type exitError struct{ code int }

func (e exitError) Error() string { return fmt.Sprintf("exit %d", e.code) }

func exitCode(err error, stderr io.Writer) int {
	var ee exitError
	switch {
	case err == nil:
		return 0
	case errors.As(err, &ee):
		return ee.code
	default:
		fmt.Fprintln(stderr, "csi-gateway:", err)
		return 1
	}
}

// run is the whole program: it parses args, runs one subcommand until it ends or ctx is
// cancelled (SIGTERM, Ctrl-C), and returns its error. Tests call it directly.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	root := &cobra.Command{
		Use:           "csi-gateway",
		Short:         "A CSI gateway: one socket in front of gRPC drivers, HTTP appliances and an embedded appliance",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	root.AddCommand(newServeCommand(), newApplianceCommand(), newCallCommand(), newTapCommand(), newInitiatorsCommand(), newLedgerCommand())
	addVersion(root, readBuildInfo(version))
	return root.ExecuteContext(ctx)
}
