package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/csi-gateway/csi-gateway/proxy"
)

// tapLine is one line of a tap stream: a call record, or a notice of dropped records.
type tapLine struct {
	Dropped *uint64 `json:"dropped"`
	proxy.CallRecord
}

func parseTapLine(b []byte) (tapLine, error) {
	var l tapLine
	if err := json.Unmarshal(b, &l); err != nil {
		return tapLine{}, err
	}
	if l.Dropped == nil && l.Method == "" {
		return tapLine{}, errors.New("it has no method")
	}
	return l, nil
}

// tapRenderer prints a tap stream. line is the line as received, without its newline.
type tapRenderer interface {
	header() error
	record(line []byte, rec proxy.CallRecord) error
	dropped(line []byte, n uint64) error
}

func newTapRenderer(output string, w io.Writer) (tapRenderer, error) {
	switch output {
	case "table":
		return tapTable{w}, nil
	case "json":
		return tapJSON{w}, nil
	}
	return nil, usagef("--output %q: want table or json", output)
}

// tapJSON prints the stream as received: NDJSON, drop notices included.
type tapJSON struct{ w io.Writer }

func (tapJSON) header() error { return nil }

func (p tapJSON) record(line []byte, _ proxy.CallRecord) error { return p.write(line) }

func (p tapJSON) dropped(line []byte, _ uint64) error { return p.write(line) }

func (p tapJSON) write(line []byte) error {
	_, err := p.w.Write(append(line[:len(line):len(line)], '\n'))
	return err
}

// tapTable prints one fixed-width row per record, for a terminal.
type tapTable struct{ w io.Writer }

// tapColumns are the table's columns and their widths; MS is aligned right, the last
// column is not padded. A longer cell is cut, ending in "…".
var tapColumns = []struct {
	name  string
	width int
}{
	{"TIME", 12}, {"METHOD", 27}, {"CODE", 30}, {"MS", 8}, {"VOLUME/ID", 32}, {"BACKEND", 12}, {"TRACE", 8},
}

func (p tapTable) header() error {
	names := make([]string, len(tapColumns))
	for i, c := range tapColumns {
		names[i] = c.name
	}
	return p.row(names)
}

func (p tapTable) record(_ []byte, r proxy.CallRecord) error {
	return p.row([]string{
		r.Time.Format("15:04:05.000"), // in the gateway's zone, as its logs
		r.Method,
		codeCell(r),
		strconv.FormatFloat(r.DurationMS, 'f', 1, 64),
		mostSpecificID(r.IDs),
		r.Backend,
		shortTraceID(r.TraceID),
	})
}

func (p tapTable) dropped(_ []byte, n uint64) error {
	_, err := fmt.Fprintf(p.w, "-- %s dropped (tap too slow) --\n", records(n))
	return err
}

// codeCell is the code the caller got, followed by the backend's own ("OK←NotFound") when
// the gateway answered with another (see proxy.Repair).
func codeCell(r proxy.CallRecord) string {
	if r.BackendCode == "" || r.BackendCode == r.CodeName {
		return r.CodeName
	}
	return r.CodeName + "←" + r.BackendCode
}

// records is "1 record" or "N records".
func records[N int | uint64](n N) string {
	if n == 1 {
		return "1 record"
	}
	return fmt.Sprintf("%d records", n)
}

func (p tapTable) row(cells []string) error {
	var b strings.Builder
	for i, c := range tapColumns {
		s := cell(cells[i], c.width)
		pad := strings.Repeat(" ", c.width-utf8.RuneCountInString(s))
		switch {
		case i == len(tapColumns)-1:
			b.WriteString(s)
		case c.name == "MS":
			b.WriteString(pad + s + "  ")
		default:
			b.WriteString(s + pad + "  ")
		}
	}
	b.WriteByte('\n')
	_, err := io.WriteString(p.w, b.String())
	return err
}

// cell fits s in width runes: "-" when empty, cut with "…" when too long. Characters that
// are not printable (a caller chose the name: it could hold terminal escapes) become "?".
func cell(s string, width int) string {
	if s == "" {
		return "-"
	}
	s = strings.Map(func(r rune) rune {
		if !unicode.IsPrint(r) {
			return '?'
		}
		return r
	}, s)
	if utf8.RuneCountInString(s) <= width {
		return s
	}
	return string([]rune(s)[:width-1]) + "…"
}

// shortTraceID is the first 8 hex digits of a trace ID: enough to tell calls apart on a
// screen and to find the trace.
func shortTraceID(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// tapIDOrder ranks the recorded IDs from the most to the least specific: what a call is
// about (the snapshot it lists, the volume it publishes, the name it creates) before where
// from (source volume) or where to (node).
var tapIDOrder = []string{"snapshot_id", "group_snapshot_id", "volume_id", "volume_group_id", "name", "source_volume_id", "node_id"}

func mostSpecificID(ids map[string]string) string {
	for _, k := range tapIDOrder {
		if v := ids[k]; v != "" {
			return v
		}
	}
	return ""
}
