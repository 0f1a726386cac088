package main

import "github.com/spf13/cobra"

// subcommand is a leaf command as this program writes them: its usage line, its one-line
// summary, the check of its positional arguments and what it runs. Long help, examples and
// flags are set by the caller.
func subcommand(use, short string, args cobra.PositionalArgs, run func(cmd *cobra.Command, args []string) error) *cobra.Command {
	return &cobra.Command{Use: use, Short: short, Args: args, RunE: run}
}
