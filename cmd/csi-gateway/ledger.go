package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/csi-gateway/csi-gateway/proxy/tenancy"
)

const ledgerLong = `Back up, restore and move the tenancy ledger of a central gateway, and
release the quota holds of creates that will never be retried.

A STORE is one of:

  bbolt:PATH            a ledger file (a central gateway must not have it open)
  etcd:URL[,URL...]     etcd without TLS, under the default prefix ` + tenancy.DefaultEtcdPrefix + `
  config:FILE           the tenancy.store (or tenancy.ledger) of a gateway configuration
                        file: etcd with TLS, a prefix of its own

An export is the ledger's records (which tenant owns which backend object, the names they
were created under, volumes' bytes) with each tenant's counts, as canonical JSON: the same
records give the same bytes, whichever store they come from. It holds no quota holds nor
operation locks: they belong to calls in flight (a create's hold, to the retry of its
name); such a call is recorded by the orchestrator's retry, as after a crash.

import refuses a store that holds records unless --merge (then importing the same file
again changes nothing). migrate copies one store into another, empty one, then exports
both and compares the counts per kind and tenant and the SHA-256 of the exports; a target
that already holds exactly the source's records is left as it is. An etcd source is fenced
first: every gateway still using it has its writes refused (UNAVAILABLE, naming the fence),
so none can be missed by the copy. The fence stays after a verified migration (point the
gateways at the target) and is lifted if the migration fails; unfence lifts it by hand.
A bbolt source needs none: a running gateway keeps its file from the command.

holds lists the quota holds of creates whose outcome is not known yet; release-hold deletes
one, once the backend is known to hold no volume of its name.

Exit status: 0; 1 on an error, or when migrate's copy does not match.`

const ledgerExample = `  csi-gateway ledger export --store bbolt:/var/lib/csi-gateway/tenancy.db -o ledger.json
  csi-gateway ledger import --store config:/etc/csi-gateway/config.yaml ledger.json
  csi-gateway ledger migrate --from bbolt:/var/lib/csi-gateway/tenancy.db --to config:/etc/csi-gateway/config.yaml
  csi-gateway ledger holds --store config:/etc/csi-gateway/config.yaml -o json
  csi-gateway ledger release-hold --store config:/etc/csi-gateway/config.yaml --tenant blue --name blue.pvc-7`

func newLedgerCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:     "ledger",
		Short:   "Export, import and migrate the tenancy ledger (bbolt and etcd)",
		Long:    ledgerLong,
		Example: ledgerExample,
	}
	cmd.AddCommand(newLedgerExportCommand(), newLedgerImportCommand(), newLedgerMigrateCommand(), newLedgerUnfenceCommand(),
		newLedgerHoldsCommand(), newLedgerReleaseHoldCommand())
	return cmd
}

// ledgerStoreFlag adds the required flag name to cmd: a ledger store, what the command uses
// it as.
func ledgerStoreFlag(cmd *cobra.Command, store *string, name, what string) {
	cmd.Flags().StringVar(store, name, "", what+" (bbolt:PATH, etcd:URLS or config:FILE)")
	cmd.MarkFlagRequired(name)
}

func newLedgerExportCommand() *cobra.Command {
	var store, output string
	cmd := subcommand("export --store STORE [-o FILE]", "Write the ledger's records as JSON to stdout or a file", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return withLedgerStore(store, func(s tenancy.Store) error {
				d, err := tenancy.Export(cmd.Context(), s)
				if err != nil {
					return fmt.Errorf("export from %s: %w", store, err)
				}
				if err := writeDump(cmd.OutOrStdout(), output, d); err != nil {
					return err
				}
				printSummary(cmd.ErrOrStderr(), "exported", d)
				return nil
			})
		})
	ledgerStoreFlag(cmd, &store, "store", "the ledger to export")
	cmd.Flags().StringVarP(&output, "output", "o", "", "file to write (default stdout); written whole or not at all")
	return cmd
}

func newLedgerImportCommand() *cobra.Command {
	var store string
	var merge bool
	cmd := subcommand("import --store STORE [--merge] FILE", "Record an export's objects in a ledger (FILE - reads stdin)", cobra.ExactArgs(1),
		func(cmd *cobra.Command, args []string) error {
			d, err := readDumpFile(cmd.InOrStdin(), args[0])
			if err != nil {
				return err
			}
			s, err := openLedgerStore("--store", store, false)
			if err != nil {
				return err
			}
			defer s.Close()
			if err := tenancy.Import(cmd.Context(), s, d, merge); err != nil {
				if errors.Is(err, tenancy.ErrNotEmpty) {
					return fmt.Errorf("%s: %w (give --merge to add the export's records to it)", store, err)
				}
				return fmt.Errorf("import into %s: %w", store, err)
			}
			printSummary(cmd.ErrOrStderr(), "imported", d)
			return nil
		})
	ledgerStoreFlag(cmd, &store, "store", "the ledger to import into")
	cmd.Flags().BoolVar(&merge, "merge", false, "add the records to a ledger that holds some (objects of another tenant are refused)")
	return cmd
}

func newLedgerMigrateCommand() *cobra.Command {
	var from, to string
	cmd := subcommand("migrate --from STORE --to STORE", "Copy a ledger into an empty store and verify the copy (counts and SHA-256)", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return migrateLedger(cmd.Context(), cmd.OutOrStdout(), from, to)
		})
	ledgerStoreFlag(cmd, &from, "from", "the ledger to copy")
	ledgerStoreFlag(cmd, &to, "to", "the store to copy it into, empty")
	return cmd
}

func newLedgerUnfenceCommand() *cobra.Command {
	var store string
	cmd := subcommand("unfence --store STORE", "Let gateways write to a ledger in etcd that migrate fenced", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error {
			return withLedgerStore(store, func(s tenancy.Store) error {
				removed, err := tenancy.Unfence(cmd.Context(), s)
				switch {
				case err != nil:
					return fmt.Errorf("unfence %s: %w", store, err)
				case removed:
					fmt.Fprintf(cmd.OutOrStdout(), "lifted the fence of %s: gateways using it write to it again\n", store)
				default:
					fmt.Fprintf(cmd.OutOrStdout(), "%s has no fence\n", store)
				}
				return nil
			})
		})
	ledgerStoreFlag(cmd, &store, "store", "the ledger to unfence")
	return cmd
}

// migrateLedger fences from (etcd: no gateway writes to it any more), copies it into to and
// compares their exports, printing both summaries. A fence it put is lifted if the migration
// fails, and stays when it succeeds: gateways still using the source cannot write what the
// target would miss.
func migrateLedger(ctx context.Context, out io.Writer, from, to string) (err error) {
	src, err := openLedgerStore("--from", from, true)
	if err != nil {
		return err
	}
	defer src.Close()
	dst, err := openLedgerStore("--to", to, false)
	if err != nil {
		return err
	}
	defer dst.Close()
	fenced, added, err := tenancy.Fence(ctx, src, "csi-gateway ledger migrate to "+to)
	if err != nil {
		return fmt.Errorf("fence %s: %w", from, err)
	}
	if added {
		fmt.Fprintf(out, "fenced %s: the gateways using it can no longer write to it\n", from)
		defer func() {
			if err == nil {
				return
			}
			if _, uerr := tenancy.Unfence(context.WithoutCancel(ctx), src); uerr != nil {
				err = fmt.Errorf("%w; and lifting the fence of %s failed: %v (run `csi-gateway ledger unfence --store %s`)", err, from, uerr, from)
				return
			}
			fmt.Fprintf(out, "lifted the fence of %s: the migration failed\n", from)
		}()
	}
	if err := copyLedger(ctx, out, src, dst, from, to); err != nil {
		return err
	}
	if fenced {
		fmt.Fprintf(out, "%s stays fenced: point the gateways at %s (`csi-gateway ledger unfence --store %s` makes it writable again)\n", from, to, from)
	}
	return nil
}

// copyLedger imports src's export into dst and compares their exports.
func copyLedger(ctx context.Context, out io.Writer, src, dst tenancy.Store, from, to string) error {
	want, err := tenancy.Export(ctx, src)
	if err != nil {
		return fmt.Errorf("export from %s: %w", from, err)
	}
	switch err := tenancy.Import(ctx, dst, want, false); {
	case errors.Is(err, tenancy.ErrNotEmpty):
		fmt.Fprintf(out, "%s is not empty: comparing it with %s\n", to, from)
	case err != nil:
		return fmt.Errorf("import into %s: %w", to, err)
	}
	got, err := tenancy.Export(ctx, dst)
	if err != nil {
		return fmt.Errorf("export from %s: %w", to, err)
	}
	printSummary(out, "source "+from, want)
	printSummary(out, "target "+to, got)
	if got.Checksum() != want.Checksum() {
		fmt.Fprintln(out, "MISMATCH: the target's records differ from the source's")
		return exitError{code: 1}
	}
	fmt.Fprintln(out, "verified: the target holds exactly the source's records")
	return nil
}

// printSummary prints a Dump's objects per tenant and kind, and its checksum.
func printSummary(w io.Writer, what string, d *tenancy.Dump) {
	fmt.Fprintf(w, "%s: %d objects, sha256 %s\n", what, len(d.Objects), d.Checksum())
	for _, t := range d.Tenants {
		fmt.Fprintf(w, "  %s: volume %d (%d bytes), snapshot %d, groupSnapshot %d, volumeGroup %d\n", t.Tenant,
			t.Objects["volume"], t.VolumeBytes, t.Objects["snapshot"], t.Objects["groupSnapshot"], t.Objects["volumeGroup"])
	}
}

// writeDump writes d to stdout, or to path through a temporary file renamed into place.
func writeDump(stdout io.Writer, path string, d *tenancy.Dump) error {
	if path == "" {
		return d.Encode(stdout)
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	err = errors.Join(d.Encode(f), f.Sync(), f.Close())
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}

func readDumpFile(stdin io.Reader, path string) (*tenancy.Dump, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		r = f
	}
	d, err := tenancy.ReadDump(r)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return d, nil
}

// withLedgerStore runs do on the ledger that --store spec names, open as a source for the
// length of do.
func withLedgerStore(spec string, do func(tenancy.Store) error) error {
	s, err := openLedgerStore("--store", spec, true)
	if err != nil {
		return err
	}
	defer s.Close()
	return do(s)
}

// openLedgerStore opens a STORE given to flag: bbolt:PATH, etcd:URLS or config:FILE. A
// source's bbolt file must exist (a mistyped path would otherwise export an empty ledger).
func openLedgerStore(flag, spec string, source bool) (tenancy.Store, error) {
	kind, arg, _ := strings.Cut(spec, ":")
	var t TenancyConfig
	switch {
	case arg == "":
		return nil, ledgerUsage(flag, spec)
	case kind == "bbolt":
		t.Store.Bbolt = &BboltStoreConfig{Path: arg}
	case kind == "etcd":
		t.Store.Etcd = &EtcdStoreConfig{Endpoints: strings.Split(arg, ",")}
		for _, ep := range t.Store.Etcd.Endpoints {
			if err := validEtcdEndpoint(ep, false); err != nil {
				return nil, fmt.Errorf("%s %s: %w (etcd: is without TLS; give config:FILE for a store with TLS)", flag, spec, err)
			}
		}
	case kind == "config":
		flags := pflag.NewFlagSet("ledger", pflag.ContinueOnError)
		bindServeFlags(flags)
		flags.Set("config", arg)
		cfg, err := loadConfig(flags, os.Getenv, os.Environ())
		if err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, spec, err)
		}
		if !cfg.Tenancy.enabled() {
			return nil, fmt.Errorf("%s %s: the file configures no tenancy.store", flag, spec)
		}
		t = cfg.Tenancy
	default:
		return nil, ledgerUsage(flag, spec)
	}
	if path := cmp.Or(t.Ledger, bboltPath(t.Store.Bbolt)); source && path != "" {
		if _, err := os.Stat(path); err != nil {
			return nil, fmt.Errorf("%s %s: %w", flag, spec, err)
		}
	}
	s, _, err := t.loadAndOpenStore(slog.New(slog.DiscardHandler))
	if errors.Is(err, tenancy.ErrLedgerInUse) {
		return nil, fmt.Errorf("%s %s: %w: stop the central gateway first (a ledger in etcd is worked on while the gateways run)", flag, spec, err)
	}
	if err != nil {
		return nil, fmt.Errorf("%s %s: %w", flag, spec, err)
	}
	return s, nil
}

func bboltPath(b *BboltStoreConfig) string {
	if b == nil {
		return ""
	}
	return b.Path
}

func ledgerUsage(flag, spec string) error {
	return fmt.Errorf("%s %q: want bbolt:PATH, etcd:URL[,URL...] or config:FILE", flag, spec)
}
