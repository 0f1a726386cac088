package main

import (
	"bytes"
	"context"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/spf13/pflag"

	"github.com/csi-gateway/csi-gateway/internal/testutil"
)

// socketModeForm is one way of writing a socket mode, and what must come of it: the mode the
// socket gets, or the exact error.
type socketModeForm struct {
	written string
	mode    fs.FileMode
	err     string
}

// listenerModeOnDisk opens listener 0 of c as serve does and returns its socket's mode.
func listenerModeOnDisk(t *testing.T, c Config) fs.FileMode {
	t.Helper()
	l, err := listen(c.Listeners[0])
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(c.Listeners[0].Endpoint.Address)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Mode().Perm()
}

// checkSocketMode loads a configuration (see loadFrom) and checks what comes of form: the
// socket's real mode, or the exact error.
func checkSocketMode(t *testing.T, form socketModeForm, yaml string, args []string, env map[string]string) {
	t.Helper()
	c, err := loadFrom(t, yaml, args, env)
	if form.err != "" {
		if err == nil || err.Error() != form.err {
			t.Fatalf("error %v\nwant  %s", err, form.err)
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	if got := listenerModeOnDisk(t, c); got != form.mode {
		t.Errorf("the socket's mode on disk is %04o, want %04o", got, form.mode)
	}
}

// socketEndpoint is a socket path in a fresh directory, as an endpoint.
func socketEndpoint(t *testing.T) string {
	return "unix://" + filepath.Join(t.TempDir(), "csi.sock")
}

// TestSocketModeKey: every way of writing socketMode in the file. viper's YAML parser
// (go.yaml.in/yaml/v3) reads an unquoted 0660 and 0o660 as octal (432) and 660 as decimal, and
// 0999 as the float 999: all bare numbers are refused, naming the key and the quoted form.
func TestSocketModeKey(t *testing.T) {
	bare := func(read, quoted string) string {
		return "listeners[0].socketMode: a mode written as a bare number is refused (YAML read it as " + read +
			"; whether a leading 0 means octal depends on the YAML version); write it quoted: socketMode: \"" + quoted + "\""
	}
	for _, form := range []socketModeForm{
		{`"0660"`, 0o660, ""},
		{`"660"`, 0o660, ""},
		{`"0o660"`, 0o660, ""},
		{`'0600'`, 0o600, ""},
		{`""`, 0o660, ""},
		{`~`, 0o660, ""}, // null, as socketMode: with no value
		{`0660`, 0, bare("432", "0660")},
		{`660`, 0, bare("660", "0660")},
		{`0o660`, 0, bare("432", "0660")},
		{`0600`, 0, bare("384", "0600")},
		{`0999`, 0, bare("999", "0660")},
		{`"0999"`, 0, `listeners[0].socketMode: "0999" is not an octal mode such as "0660"`},
		{`"1777"`, 0, `listeners[0].socketMode: "1777" is above 0777: a socket mode has permission bits only, such as "0660"`},
		{`"rw-rw----"`, 0, `listeners[0].socketMode: "rw-rw----" is not an octal mode such as "0660"`},
		{`rw-rw----`, 0, `listeners[0].socketMode: "rw-rw----" is not an octal mode such as "0660"`},
		{`true`, 0, `listeners[0].socketMode: true is not an octal mode such as "0660"`},
	} {
		t.Run(form.written, func(t *testing.T) {
			yaml := "listeners:\n  - endpoint: " + socketEndpoint(t) + "\n    socketMode: " + form.written + "\n"
			checkSocketMode(t, form, yaml, nil, nil)
		})
	}
	t.Run("second listener", func(t *testing.T) {
		yaml := "listeners:\n  - endpoint: " + socketEndpoint(t) + "\n  - endpoint: " + socketEndpoint(t) + "\n    socketMode: 0660\n"
		checkSocketMode(t, socketModeForm{err: strings.Replace(bare("432", "0660"), "[0]", "[1]", 1)}, yaml, nil, nil)
	})
	t.Run("absent", func(t *testing.T) {
		checkSocketMode(t, socketModeForm{mode: 0o660}, "listeners:\n  - endpoint: "+socketEndpoint(t)+"\n", nil, nil)
	})
}

// TestSocketModeVariableAndFlag: CSIGW_SOCKET_MODE and serve's --socket-mode set the first
// listener's mode, in the key's forms, the flag over the variable over the file.
func TestSocketModeVariableAndFlag(t *testing.T) {
	file := func(t *testing.T) string {
		return "listeners:\n  - endpoint: " + socketEndpoint(t) + "\n    socketMode: \"0600\"\n"
	}
	for _, form := range []socketModeForm{
		{"0640", 0o640, ""},
		{"640", 0o640, ""},
		{"0o640", 0o640, ""},
		{"0999", 0, `"0999" is not an octal mode such as "0660"`},
		{"1777", 0, `"1777" is above 0777: a socket mode has permission bits only, such as "0660"`},
		{"rw-rw----", 0, `"rw-rw----" is not an octal mode such as "0660"`},
	} {
		t.Run("CSIGW_SOCKET_MODE="+form.written, func(t *testing.T) {
			variable := form
			if form.err != "" {
				variable.err = "CSIGW_SOCKET_MODE: " + form.err
			}
			checkSocketMode(t, variable, file(t), nil, map[string]string{"CSIGW_SOCKET_MODE": form.written})
		})
		t.Run("--socket-mode="+form.written, func(t *testing.T) {
			if form.err == "" {
				checkSocketMode(t, form, file(t), []string{"--socket-mode", form.written}, map[string]string{"CSIGW_SOCKET_MODE": "0604"})
				return
			}
			flags := pflag.NewFlagSet("serve", pflag.ContinueOnError)
			flags.SetOutput(io.Discard)
			bindServeFlags(flags)
			err := flags.Parse([]string{"--socket-mode", form.written})
			if want := `invalid argument "` + form.written + `" for "--socket-mode" flag: ` + form.err; err == nil || err.Error() != want {
				t.Fatalf("error %v\nwant  %s", err, want)
			}
		})
	}
	t.Run("--socket-mode empty", func(t *testing.T) {
		checkSocketMode(t, socketModeForm{mode: 0o660}, file(t), []string{"--socket-mode="}, nil)
	})
	t.Run("CSIGW_SOCKET_MODE empty", func(t *testing.T) {
		checkSocketMode(t, socketModeForm{mode: 0o600}, file(t), nil, map[string]string{"CSIGW_SOCKET_MODE": ""})
	})
	t.Run("no file", func(t *testing.T) {
		endpoint := socketEndpoint(t)
		checkSocketMode(t, socketModeForm{mode: 0o604}, "", []string{"--endpoint", endpoint}, map[string]string{"CSIGW_SOCKET_MODE": "604"})
	})
}

// TestSocketModeFlagHelp: both commands show the flag's default as the mode it is.
func TestSocketModeFlagHelp(t *testing.T) {
	for _, command := range []string{"serve", "appliance"} {
		var stdout, stderr bytes.Buffer
		if err := run(context.Background(), []string{command, "--help"}, &stdout, &stderr); err != nil {
			t.Fatal(err)
		}
		var line string
		for l := range strings.Lines(stdout.String()) {
			if strings.Contains(l, "--socket-mode") {
				line = l
			}
		}
		if !strings.Contains(line, "--socket-mode mode ") || !strings.HasSuffix(line, "(default 0660)\n") {
			t.Errorf("%s --help: %q", command, line)
		}
	}
}

// TestSocketModeCommands: serve and appliance, run as main runs them, create their socket
// with --socket-mode's mode, and refuse a mode they cannot parse before opening anything.
func TestSocketModeCommands(t *testing.T) {
	// serve tunes the garbage collector unless GOGC and GOMEMLIMIT are set: leave this
	// process's as it is (the runtime read them at start; serve only looks).
	t.Setenv("GOGC", "100")
	t.Setenv("GOMEMLIMIT", "off")
	for _, tc := range []struct {
		name  string
		args  func(dir, endpoint string) []string
		ready string // the log line that says the socket is open
	}{
		{"serve", func(dir, endpoint string) []string {
			return []string{"serve", "--endpoint", endpoint, "--data-dir", filepath.Join(dir, "data")}
		}, "gateway ready"},
		{"appliance", func(dir, endpoint string) []string {
			return []string{"appliance", "--endpoint", endpoint, "--data", filepath.Join(dir, "data")}
		}, "appliance ready"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			sock := filepath.Join(dir, "csi.sock")
			args := tc.args(dir, "unix://"+sock)

			err := run(context.Background(), append(args, "--socket-mode", "0o1777"), new(bytes.Buffer), new(bytes.Buffer))
			want := `invalid argument "0o1777" for "--socket-mode" flag: "0o1777" is above 0777: a socket mode has permission bits only, such as "0660"`
			if err == nil || err.Error() != want {
				t.Fatalf("error %v\nwant  %s", err, want)
			}
			if _, err := os.Stat(filepath.Join(dir, "data")); err == nil {
				t.Error("a refused mode left the data directory created")
			}

			ctx, cancel := context.WithCancel(context.Background())
			var (
				stderr   testutil.SyncBuffer
				runErr   error
				finished = make(chan struct{})
			)
			go func() {
				runErr = run(ctx, append(args, "--socket-mode", "0o640"), new(bytes.Buffer), &stderr)
				close(finished)
			}()
			defer func() {
				cancel()
				<-finished
				if runErr != nil {
					t.Errorf("%s: %v", tc.name, runErr)
				}
			}()
			waitForLog(t, &stderr, tc.ready, finished)
			fi, err := os.Stat(sock)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != 0o640 {
				t.Errorf("the socket's mode on disk is %04o, want 0640", fi.Mode().Perm())
			}
		})
	}
}

// waitForLog waits until the log holds line, failing if the command ends first (finished is
// closed) or after 30 s.
func waitForLog(t *testing.T, log *testutil.SyncBuffer, line string, finished <-chan struct{}) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !strings.Contains(log.String(), line) {
		select {
		case <-finished:
			t.Fatalf("the command ended before saying %q:\n%s", line, log.String())
		case <-time.After(10 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %q in the log after 30 s:\n%s", line, log.String())
		}
	}
}
