package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"time"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	switch {
	case err == nil:
	case errors.Is(err, errLeftovers):
		os.Exit(1)
	default:
		fmt.Fprintln(os.Stderr, "leftovers:", err)
		os.Exit(2)
	}
}

// runEnv names the environment variable that marks every process of a run.
const runEnv = "CSIGWTEST_LEFTOVERS_RUN"

const usage = "usage: leftovers snapshot [-root DIR] FILE | leftovers check [-grace D] [-ignore REGEXP] FILE"

func run(args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		return errors.New(usage)
	}
	h := host{root: "/", self: os.Getpid()}
	fs := flag.NewFlagSet("leftovers "+args[0], flag.ContinueOnError)
	fs.SetOutput(stderr)
	switch args[0] {
	case "snapshot":
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		root := fs.String("root", wd, "the checkout: processes working or running from under it are the run's")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
			return errors.New(usage)
		}
		s, err := takeSnapshot(h, os.Getenv(runEnv), *root)
		if err != nil {
			return err
		}
		return s.write(fs.Arg(0))
	case "check":
		grace := fs.Duration("grace", 10*time.Second, "how long leftovers may take to go away")
		ignore := fs.String("ignore", "", "drop the leftovers whose line matches this regular expression")
		if err := fs.Parse(args[1:]); err != nil || fs.NArg() != 1 {
			return errors.New(usage)
		}
		var ig *regexp.Regexp
		if *ignore != "" {
			var err error
			if ig, err = regexp.Compile(*ignore); err != nil {
				return fmt.Errorf("-ignore: %v", err)
			}
		}
		s, err := readSnapshot(fs.Arg(0))
		if err != nil {
			return err
		}
		return check(h, s, *grace, ig, stdout)
	}
	return errors.New(usage)
}
