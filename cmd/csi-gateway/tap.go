package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// defaultAdmin is where tap looks for the gateway's admin endpoint when neither --admin
// nor CSIGW_ADMIN_LISTEN says.
const defaultAdmin = "127.0.0.1:9808"

const tapLong = `Stream the calls a running gateway answers, as they end: method, code, duration, the
volume or other ID the call is about, backend and trace ID. Payloads and secrets are never
part of it.

tap reads the gateway's admin endpoint (admin.listen in serve's configuration, or --admin
of serve); it connects to --admin, else $CSIGW_ADMIN_LISTEN, else ` + defaultAdmin + `.
The gateway serves the tap to loopback peers only unless admin.remoteTap is set: run tap on
the gateway's host (or through kubectl exec or kubectl port-forward).
The filters are those of GET ` + proxy.TapPath + `: --method takes a short or full name or a
glob (Node*), --code a gRPC code or !CODE to leave one out (!OK: failures only).

--output table (the default) is for a terminal; --output json prints the stream as the
gateway sends it, one JSON object per line, for tools. When the gateway had to drop records
because the tap read too slowly, the table says "-- N records dropped (tap too slow) --"
and the JSON stream has a {"dropped":N} line.

tap runs until Ctrl-C, or until --count records have been printed.`

const tapExample = `  csi-gateway tap
  csi-gateway tap --code '!OK'
  csi-gateway tap --method 'Node*' --volume pvc-5f1c
  csi-gateway tap --admin 127.0.0.1:9818 --output json --count 100 > calls.ndjson`

// tapOptions are the flags of `csi-gateway tap`.
type tapOptions struct {
	admin                         string
	method, code, volume, backend string
	output                        string
	count                         int
}

func newTapCommand() *cobra.Command {
	o := &tapOptions{}
	cmd := subcommand("tap [flags]", "Stream the calls a running gateway answers, live, from its admin endpoint", cobra.NoArgs,
		func(cmd *cobra.Command, _ []string) error { return finishUsage(cmd, "tap", o.run(cmd)) })
	cmd.Long, cmd.Example = tapLong, tapExample
	f := cmd.Flags()
	f.StringVar(&o.admin, "admin", "", "host:port of the gateway's admin endpoint (default $CSIGW_ADMIN_LISTEN, else "+defaultAdmin+")")
	f.StringVar(&o.method, "method", "", "only this method: short or full name, or a glob such as Node*")
	f.StringVar(&o.code, "code", "", "only calls that ended with this gRPC code (NotFound), or not with it (!OK)")
	f.StringVar(&o.volume, "volume", "", "only calls about this volume ID (volume_id or source_volume_id)")
	f.StringVar(&o.backend, "backend", "", "only calls routed to this backend")
	f.StringVarP(&o.output, "output", "o", "table", "table (for a terminal) or json (one object per line, as received)")
	f.IntVar(&o.count, "count", 0, "exit after this many records (0: run until Ctrl-C)")
	cmd.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return finishUsage(c, "tap", usageError{err.Error()}) })
	return cmd
}

func (o *tapOptions) run(cmd *cobra.Command) error {
	out, err := newTapRenderer(o.output, cmd.OutOrStdout())
	if err != nil {
		return err
	}
	if o.count < 0 {
		return usagef("--count %d: want 0 (no limit) or more", o.count)
	}
	addr := o.adminAddr()
	u, err := o.url(addr)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	body, err := openTap(ctx, addr, u)
	if err != nil {
		if ctx.Err() != nil {
			return nil // Ctrl-C while connecting
		}
		return err
	}
	defer body.Close()
	fmt.Fprintf(cmd.ErrOrStderr(), "csi-gateway tap: streaming the calls of the gateway at %s\n", addr)
	if err := out.header(); err != nil {
		return err
	}

	lines := bufio.NewScanner(body)
	lines.Buffer(make([]byte, 64<<10), 1<<20)
	seen := 0
	for lines.Scan() {
		l, err := parseTapLine(lines.Bytes())
		if err != nil {
			return fmt.Errorf("the tap at %s sent a line that is not a call record: %v", addr, err)
		}
		if l.Dropped != nil {
			err = out.dropped(lines.Bytes(), *l.Dropped)
		} else {
			seen++
			err = out.record(lines.Bytes(), l.CallRecord)
		}
		if err != nil {
			return fmt.Errorf("writing the output: %w", err)
		}
		if o.count > 0 && seen == o.count {
			return nil
		}
	}
	switch err := lines.Err(); {
	case ctx.Err() != nil:
		return nil // Ctrl-C
	case errors.Is(err, bufio.ErrTooLong):
		return fmt.Errorf("the tap at %s sent a line longer than 1 MiB", addr)
	case err != nil:
		return fmt.Errorf("the tap at %s broke off after %s: %v", addr, records(seen), err)
	}
	return fmt.Errorf("the gateway at %s ended the tap after %s (is it shutting down?)", addr, records(seen))
}

// adminAddr is --admin, else CSIGW_ADMIN_LISTEN (the variable serve reads admin.listen
// from), else the default.
func (o *tapOptions) adminAddr() string {
	if o.admin != "" {
		return o.admin
	}
	if s := os.Getenv("CSIGW_ADMIN_LISTEN"); s != "" {
		return s
	}
	return defaultAdmin
}

// url is the tap's URL at addr (host:port, or an http:// URL) with the filters as its query.
func (o *tapOptions) url(addr string) (string, error) {
	base := addr
	if !strings.Contains(base, "://") {
		base = "http://" + base
	}
	u, err := url.Parse(base)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", usagef("admin address %q: want host:port, e.g. %s", addr, defaultAdmin)
	}
	u.Path = strings.TrimSuffix(u.Path, "/") + proxy.TapPath
	q := url.Values{}
	for key, v := range map[string]string{"method": o.method, "code": o.code, "volume": o.volume, "backend": o.backend} {
		if v != "" {
			q.Set(key, v)
		}
	}
	u.RawQuery = q.Encode()
	return u.String(), nil
}

// openTap subscribes to the tap at u and returns the stream, or an error that says what to
// check.
func openTap(ctx context.Context, addr, u string) (io.ReadCloser, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return nil, usagef("admin address %q: %v", addr, err)
	}
	req.Header.Set("Accept", "application/x-ndjson")
	client := &http.Client{Transport: &http.Transport{
		// No proxy: the admin endpoint is local or on an operators' network. No overall
		// timeout: the stream lasts as long as tap runs; the gateway answers at once.
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
		TLSHandshakeTimeout:   10 * time.Second,
		ResponseHeaderTimeout: 10 * time.Second,
	}}
	resp, err := client.Do(req)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the method and URL, which the message already names
		}
		return nil, fmt.Errorf("cannot reach the gateway's admin endpoint at %s: %v; is serve running with admin.listen set?", addr, err)
	}
	if resp.StatusCode == http.StatusOK && strings.HasPrefix(resp.Header.Get("Content-Type"), "application/x-ndjson") {
		return resp.Body, nil
	}
	defer resp.Body.Close()
	msg, _ := io.ReadAll(io.LimitReader(resp.Body, 1024))
	switch resp.StatusCode {
	case http.StatusOK:
		return nil, fmt.Errorf("%s answered %s with %q, not a tap stream; is it the gateway's admin endpoint?", addr, proxy.TapPath, resp.Header.Get("Content-Type"))
	case http.StatusNotFound:
		return nil, fmt.Errorf("this gateway serves no tap at %s", addr)
	case http.StatusBadRequest: // a filter the gateway does not take: a usage error
		return nil, usagef("%s", strings.TrimPrefix(firstLine(msg), "tap: "))
	}
	return nil, fmt.Errorf("the gateway at %s refused the tap: %s: %s", addr, resp.Status, firstLine(msg))
}

// firstLine is the first line of an error body, trimmed.
func firstLine(b []byte) string {
	s, _, _ := strings.Cut(strings.TrimSpace(string(b)), "\n")
	return s
}
