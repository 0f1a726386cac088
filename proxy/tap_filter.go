package proxy

import (
	"fmt"
	"maps"
	"net/url"
	"path"
	"slices"
	"strconv"
	"strings"

	"google.golang.org/grpc/codes"
)

// tapFilter selects the records a subscriber gets; its zero value selects all of them.
type tapFilter struct {
	methods  []tapPattern
	codes    uint64 // bit c set: code c is wanted; 0: any code
	notCodes uint64 // bit c set: code c is not wanted
	volumes  []string
	backends []string
}

type tapPattern struct {
	s    string
	glob bool
}

func (f *tapFilter) match(rec *CallRecord) bool {
	if len(f.methods) > 0 && !slices.ContainsFunc(f.methods, func(p tapPattern) bool { return p.match(rec) }) {
		return false
	}
	bit := codeBit(rec.Code)
	if (f.codes != 0 && f.codes&bit == 0) || f.notCodes&bit != 0 {
		return false
	}
	if len(f.volumes) > 0 && !slices.ContainsFunc(f.volumes, func(v string) bool {
		return v == rec.IDs["volume_id"] || v == rec.IDs["source_volume_id"]
	}) {
		return false
	}
	return len(f.backends) == 0 || slices.Contains(f.backends, rec.Backend)
}

func (p tapPattern) match(rec *CallRecord) bool {
	if !p.glob {
		return p.s == rec.Method || p.s == rec.FullMethod
	}
	short, _ := path.Match(p.s, rec.Method) // the pattern was checked by parseTapFilter
	full, _ := path.Match(p.s, rec.FullMethod)
	return short || full
}

// codeBit is c's bit in a tapFilter's code sets; 0 for a code past 63, which no gRPC
// server sends.
func codeBit(c codes.Code) uint64 {
	if c > 63 {
		return 0
	}
	return 1 << c
}

// parseTapFilter reads the query of a tap request. Its errors are for the client.
func parseTapFilter(q url.Values) (tapFilter, error) {
	var f tapFilter
	for _, key := range slices.Sorted(maps.Keys(q)) { // the first unknown filter, always the same
		for _, v := range q[key] {
			if v == "" {
				return tapFilter{}, fmt.Errorf("tap: filter %q is empty", key)
			}
			switch key {
			case "method":
				if strings.Contains(v, "/") && !strings.HasPrefix(v, "/") {
					v = "/" + v // "csi.v1.Controller/CreateVolume"
				}
				if _, err := path.Match(v, ""); err != nil {
					return tapFilter{}, fmt.Errorf("tap: method %q: bad glob pattern", v)
				}
				f.methods = append(f.methods, tapPattern{s: v, glob: strings.ContainsAny(v, `*?[\`)})
			case "code":
				neg := strings.HasPrefix(v, "!")
				c, ok := parseCode(strings.TrimPrefix(v, "!"))
				if !ok {
					return tapFilter{}, fmt.Errorf("tap: code %q is not a gRPC code such as NotFound, or one excluded such as !OK", v)
				}
				if neg {
					f.notCodes |= codeBit(c)
				} else {
					f.codes |= codeBit(c)
				}
			case "volume":
				f.volumes = append(f.volumes, v)
			case "backend":
				f.backends = append(f.backends, v)
			default:
				return tapFilter{}, fmt.Errorf("tap: unknown filter %q; the filters are method, code, volume and backend", key)
			}
		}
	}
	return f, nil
}

// parseCode reads a gRPC code by its Go name (NotFound), its canonical name (NOT_FOUND, in
// any case) or its number.
func parseCode(s string) (codes.Code, bool) {
	if n, err := strconv.ParseUint(s, 10, 32); err == nil {
		return codes.Code(n), n <= uint64(codes.Unauthenticated)
	}
	name := strings.ReplaceAll(s, "_", "")
	if strings.EqualFold(name, "cancelled") { // the canonical spelling
		return codes.Canceled, true
	}
	for c := codes.OK; c <= codes.Unauthenticated; c++ {
		if strings.EqualFold(name, c.String()) {
			return c, true
		}
	}
	return 0, false
}
