package main

import (
	"encoding/json"
	"fmt"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

const ledgerHoldsLong = `List the quota holds of creates whose outcome is not known yet.

A create's hold keeps room in its tenant's quota from before its backend call until its
volume is recorded. When the call ends without a definitive answer, or the gateway dies
while the backend may still be creating the volume, the hold stays (in etcd, or in the bbolt
file) until the orchestrator's retry of the same name takes it over and records the volume.
A name that is never retried keeps its room until release-hold deletes the hold.

AGE is the time since the last create of the name took the hold. With etcd this works while
the gateways run; a bbolt file must not be open in a running gateway (stop it first).`

const ledgerReleaseHoldLong = `Delete one create's quota hold, giving its room back to the tenant.

Before releasing a hold, check that the backend holds NO volume of that name (NAME is the
backend's name, as ledger holds lists it) and that no create of it is in flight: were there
such a volume, the ledger would not count it and the tenant could go over its quota. A name
the orchestrator will retry needs no release: its retry takes the hold over.

A hold that does not exist is refused (exit 1). With etcd this works while the gateways run;
a bbolt file must not be open in a running gateway (stop it first).`

func newLedgerHoldsCommand() *cobra.Command {
	var store, output string
	cmd := subcommand("holds --store STORE [-o table|json]", "List the quota holds of creates whose outcome is not known yet", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			if output != "table" && output != "json" {
				return usagef("--output %q: want table or json", output)
			}
			return withLedgerStore(store, func(s tenancy.Store) error {
				holds, err := tenancy.CreateHolds(cmd.Context(), s)
				if err != nil {
					return fmt.Errorf("create holds of %s: %w", store, err)
				}
				if output == "json" {
					return writeHoldsJSON(cmd.OutOrStdout(), holds, time.Now())
				}
				return writeHoldsTable(cmd.OutOrStdout(), holds, time.Now())
			})
		})
	cmd.Long = ledgerHoldsLong
	ledgerStoreFlag(cmd, &store, "store", "the ledger")
	cmd.Flags().StringVarP(&output, "output", "o", "table", "table (for a terminal) or json (an array, with each hold's age in seconds)")
	return cmd
}

func newLedgerReleaseHoldCommand() *cobra.Command {
	var store, tenant, name string
	cmd := subcommand("release-hold --store STORE --tenant TENANT --name NAME", "Delete a create's quota hold (first check the backend has no volume of that name)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return withLedgerStore(store, func(s tenancy.Store) error {
				h, err := tenancy.ReleaseCreateHold(cmd.Context(), s, tenant, name)
				if err != nil {
					return fmt.Errorf("release-hold in %s: %w", store, err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "released the hold of tenant %s's create of %s (%d bytes)\n", h.Tenant, h.Name, h.Bytes)
				return nil
			})
		})
	cmd.Long = ledgerReleaseHoldLong
	ledgerStoreFlag(cmd, &store, "store", "the ledger")
	cmd.Flags().StringVar(&tenant, "tenant", "", "the tenant whose hold it is")
	cmd.Flags().StringVar(&name, "name", "", "the backend name of the volume, as ledger holds lists it")
	cmd.MarkFlagRequired("tenant")
	cmd.MarkFlagRequired("name")
	return cmd
}

// holdAge is how long ago a hold was taken, in whole seconds; false when it is not known.
func holdAge(h tenancy.CreateHold, now time.Time) (time.Duration, bool) {
	if h.Taken.IsZero() {
		return 0, false
	}
	return max(0, now.Sub(h.Taken)).Truncate(time.Second), true
}

func writeHoldsTable(w io.Writer, holds []tenancy.CreateHold, now time.Time) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "TENANT\tNAME\tBYTES\tAGE")
	for _, h := range holds {
		age := "unknown"
		if d, ok := holdAge(h, now); ok {
			age = d.String()
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\n", h.Tenant, h.Name, h.Bytes, age)
	}
	return tw.Flush()
}

// holdJSON is a hold as `ledger holds -o json` prints it.
type holdJSON struct {
	tenancy.CreateHold
	AgeSeconds *int64 `json:"ageSeconds,omitempty"` // nil: not known
}

func writeHoldsJSON(w io.Writer, holds []tenancy.CreateHold, now time.Time) error {
	out := make([]holdJSON, len(holds))
	for i, h := range holds {
		out[i].CreateHold = h
		if d, ok := holdAge(h, now); ok {
			secs := int64(d / time.Second)
			out[i].AgeSeconds = &secs
		}
	}
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(out)
}
